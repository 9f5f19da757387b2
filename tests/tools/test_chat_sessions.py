"""`acp-green chat`'s sessions: the demo keeps them where `serve` does (so `acp-green sessions list`
shows them) unless --ephemeral; `/sessions` lists the agent's sessions, `/load ID` and `--resume ID`
continue one with its history shown compactly; an agent without session/list or session/load is
told in one line; a state directory another process serves from is said, and chat runs on."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.helpers import REPO

CHAT = [sys.executable, "-m", "acp_green", "chat"]
SESSIONS = [sys.executable, "-m", "acp_green", "sessions", "list", "--json"]
RAW_AGENT = ["--", sys.executable, "-m", "tests.chat_raw_agent"]
BOUND = 120  # generous: only decides when a broken chat stops being waited for


def run(command: list[str], lines: str = "", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, input=lines, capture_output=True, text=True, timeout=BOUND, cwd=REPO,
                          env={**os.environ, **(env or {})})


def stored(*where: str, env: dict[str, str] | None = None) -> list[dict]:
    done = run([*SESSIONS, *where], env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_demo_keeps_its_sessions_where_serve_does_unless_ephemeral(tmp_path):
    home = {"XDG_STATE_HOME": str(tmp_path)}  # where serve (and sessions list) keep them by default
    done = run(CHAT, "hello\n", env=home)
    assert done.returncode == 0, done.stderr
    [session] = stored(env=home)
    assert session["title"] == "hello" and session["turns"] == 1
    assert run([*CHAT, "--ephemeral"], "not kept\n", env=home).returncode == 0
    assert [s["title"] for s in stored(env=home)] == ["hello"]


def test_launching_and_quitting_stores_nothing(tmp_path):
    """The session chat starts is deleted when chat ends with no prompt sent to it (Ctrl-D, the end
    of a script, a /sessions only), and when /load leaves it for another before any prompt."""
    state = str(tmp_path / "state")
    for lines in ("", "/sessions\n"):
        done = run([*CHAT, "--state-dir", state], lines)
        assert done.returncode == 0 and "(session sess_" in done.stdout, done.stderr
        assert stored("--state-dir", state) == [], lines
    assert run([*CHAT, "--state-dir", state], "kept\n").returncode == 0
    [kept] = stored("--state-dir", state)
    done = run([*CHAT, "--state-dir", state], f"/load {kept['sessionId']}\nand more\n")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert [(s["sessionId"], s["turns"]) for s in stored("--state-dir", state)] == [(kept["sessionId"], 2)]


def test_sessions_lists_them_and_resume_continues_one_showing_its_history_compactly(tmp_path):
    state = str(tmp_path / "state")
    first = run([*CHAT, "--state-dir", state], "hello\n/think\n")
    assert first.returncode == 0, first.stderr
    [session] = stored("--state-dir", state)
    sid = session["sessionId"]
    again = run([*CHAT, "--state-dir", state, "--resume", sid], "/sessions\nonce more\n")
    assert again.returncode == 0, again.stderr
    assert (f"[history of {sid}: 2 turns]\nyou: hello\nagent: hello\nyou: /think\nagent: done thinking\n"
            f"chatting with acp_green demo agent (session {sid})") in again.stdout  # no thought, no stream: a line each
    assert f"(session {sid}); Ctrl-C cancels a turn, Ctrl-D quits\nagent commands: /stream " in again.stdout  # sent with the replay
    assert f"> * {sid}  " in again.stdout  # /sessions marks the session chat is in
    assert "/load ID continues one" in again.stdout
    assert "… once more\n[end_turn]" in again.stdout
    assert [(s["sessionId"], s["turns"]) for s in stored("--state-dir", state)] == [(sid, 3)]  # continued, not copied


def test_load_switches_to_another_session_mid_chat(tmp_path):
    state = str(tmp_path / "state")
    assert run([*CHAT, "--state-dir", state], "first session\n").returncode == 0
    [old] = stored("--state-dir", state)
    done = run([*CHAT, "--state-dir", state], "second session\n/load\n/load " + old["sessionId"] + "\nback in the first\n")
    assert done.returncode == 0, done.stderr
    assert f"[history of {old['sessionId']}: 1 turns]\nyou: first session\nagent: first session\n" in done.stdout
    assert "chat: /load needs a session id (/sessions lists them)" in done.stderr
    turns = {s["title"]: s["turns"] for s in stored("--state-dir", state)}
    assert turns == {"first session": 2, "second session": 1}


def test_an_unknown_session_is_one_line(tmp_path):
    done = run([*CHAT, "--state-dir", str(tmp_path), "--resume", "sess_nope"])
    assert done.returncode == 1
    assert done.stderr.splitlines() == ["chat: the agent could not continue session sess_nope: Unknown session: 'sess_nope' (-32002)"]
    later = run([*CHAT, "--state-dir", str(tmp_path)], "/load sess_nope\nstill here\n")
    assert later.returncode == 0 and "… still here\n[end_turn]" in later.stdout
    assert "chat: the agent could not continue session sess_nope: Unknown session" in later.stderr


def test_an_agent_without_list_or_load_is_told_in_one_line():
    done = run([*CHAT, *RAW_AGENT], "/sessions\n/load s0\n")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "chat: this agent does not list its sessions (it offers no session/list)",
        "chat: this agent cannot continue a stored session (it offers neither loadSession nor session/resume)",
    ]
    resumed = run([*CHAT, "--resume", "s0", *RAW_AGENT])
    assert resumed.returncode == 1
    assert resumed.stderr.splitlines() == ["chat: this agent cannot continue a stored session (it offers neither loadSession nor session/resume)"]


def test_chat_shares_a_state_directory_another_agent_serves_from(tmp_path):
    """Another `acp-green serve` holding a session of the directory: chat's own session is stored
    beside it, and nothing is said about memory."""
    state = tmp_path / "state"
    other = subprocess.Popen([sys.executable, "-m", "acp_green", "serve", "--state-dir", str(state)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        other.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
                          b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/","mcpServers":[]}}\n')
        other.stdin.flush()
        other.stdout.readline()
        held = json.loads(other.stdout.readline())["result"]["sessionId"]
        done = run([*CHAT, "--state-dir", str(state)], "hi\n")
        assert done.returncode == 0, done.stderr
        assert "… hi\n[end_turn]" in done.stdout
        assert "memory" not in done.stderr
        listed = {row["sessionId"] for row in stored("--state-dir", str(state))}
        assert held in listed and len(listed) == 2
    finally:
        other.stdin.close()
        other.wait(timeout=30)


def test_the_state_options_are_for_the_demo_only():
    done = run([*CHAT, "--ephemeral", *RAW_AGENT])
    assert done.returncode == 2
    assert "--ephemeral and --state-dir are for the demo agent" in done.stderr


def test_help_documents_sessions_keys_and_offered_options():
    text = " ".join(run([*CHAT, "--help"]).stdout.split())
    for said in ("--ephemeral", "--resume", "--state-dir", "/sessions lists", "/load ID", "`acp-green sessions list` shows them",
                 "a second Ctrl-C, or one at the prompt, quits at once", "Ctrl-D at the prompt quits; during a turn it cancels the turn, then quits",
                 "Only the options the agent offered are shown and accepted"):
        assert said in text, said
    assert "a = allow always" not in text
