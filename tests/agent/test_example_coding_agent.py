"""examples/coding_agent.py served through its own command line over real pipes (and once in
process, through acp_green.testing): it reads a real file, proposes the change as a diff, asks,
writes, runs a check in a client terminal (the rig really runs it) and reports the exit code;
refusals and missing capabilities end cleanly."""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.tools.rig.client import AcpClient, ClientPolicy
from tests.helpers import REPO, said

EXAMPLE = str(REPO / "examples" / "coding_agent.py")
CHECK = "python3 -c 'import app, sys; sys.exit(0 if app.f() == 2 else 1)'"


def example_module() -> Any:
    spec = importlib.util.spec_from_file_location("coding_agent", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("coding_agent", module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def writes_to_disk(client: AcpClient, request: dict[str, Any]) -> None:
    """fs/write_text_file answered as an editor would: the file on disk changes."""
    params = request["params"]
    with open(params["path"], "w", encoding="utf-8") as handle:
        handle.write(params["content"])
    client.respond(request["id"], {})


def coding_client(**fields: Any) -> ClientPolicy:
    return ClientPolicy.coding(use_disk=True, handlers={"fs/write_text_file": writes_to_disk}, **fields)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "app.py").write_text("def f():\n    return 1\n")
    return tmp_path


def run_prompt(launch, project, text: str, policy: ClientPolicy) -> tuple[AcpClient, str, dict[str, Any]]:
    agent = launch(command=[sys.executable, EXAMPLE, "--state-dir", str(project / ".state")], policy=policy)
    agent.initialize()
    session_id = agent.new_session(cwd=str(project))
    result = agent.prompt(session_id, text).result(timeout=120)
    return agent, session_id, result


def tool_call_ids(agent: AcpClient, session_id: str) -> dict[str, str]:
    """The id of each tool call the turn announced, by its kind (the agent lets the runtime choose ids)."""
    return {u["kind"]: u["toolCallId"] for u in agent.updates(session_id) if u["sessionUpdate"] == "tool_call"}


def final_statuses(agent: AcpClient, session_id: str) -> dict[str, str]:
    """The last status of each tool call, by its kind (read, edit, execute)."""
    kinds = {tool_call_id: kind for kind, tool_call_id in tool_call_ids(agent, session_id).items()}
    statuses: dict[str, str] = {}
    for update in agent.updates(session_id):
        if update["sessionUpdate"] in ("tool_call", "tool_call_update") and "status" in update:
            statuses[kinds[update["toolCallId"]]] = update["status"]
    return statuses


def methods(agent: AcpClient) -> list[str]:
    return [request["method"] for request in agent.agent_requests]


def test_it_edits_after_permission_runs_the_check_in_a_terminal_and_reports_the_exit_code(launch, project):
    """The whole loop: read (absolute path), diff proposed with old and new text, permission
    before the write, the file changed on disk, the check run in a terminal in the session's
    cwd and embedded in its tool call, exit code 0 reported, every tool call completed (S5)."""
    agent, session_id, result = run_prompt(
        launch, project, f"file: app.py\nreplace: return 1\nwith: return 2\nrun: {CHECK}", coding_client())
    assert result == {"stopReason": "end_turn"}
    assert (project / "app.py").read_text() == "def f():\n    return 2\n"
    order = methods(agent)
    assert order.index("session/request_permission") < order.index("fs/write_text_file") < order.index("terminal/create")
    (read,) = [r for r in agent.agent_requests if r["method"] == "fs/read_text_file"]
    assert read["params"]["path"] == str(project / "app.py")
    (create,) = [r for r in agent.agent_requests if r["method"] == "terminal/create"]
    assert create["params"]["command"] == "python3" and create["params"]["cwd"] == str(project)
    ids = tool_call_ids(agent, session_id)
    edit = next(u for u in agent.updates(session_id) if u.get("toolCallId") == ids["edit"] and u["sessionUpdate"] == "tool_call")
    assert edit["content"] == [{"type": "diff", "path": str(project / "app.py"),
                                "oldText": "def f():\n    return 1\n", "newText": "def f():\n    return 2\n"}]
    embedded = [u for u in agent.updates(session_id) if u.get("toolCallId") == ids["execute"]
                and any(c.get("type") == "terminal" for c in u.get("content") or [])]
    assert embedded, "the check's terminal was never embedded in its tool call"
    assert final_statuses(agent, session_id) == {"read": "completed", "edit": "completed", "execute": "completed"}
    assert "exited with code 0" in said(agent.updates(session_id))
    assert methods(agent).count("terminal/release") == 1


def test_a_failing_check_is_reported_with_its_exit_code_and_its_tool_call_failed(launch, project):
    agent, session_id, result = run_prompt(
        launch, project, f"file: app.py\nreplace: return 1\nwith: return 3\nrun: {CHECK}", coding_client())
    assert result == {"stopReason": "end_turn"}
    assert "exited with code 1" in said(agent.updates(session_id))
    assert final_statuses(agent, session_id)["execute"] == "failed"


def test_a_refused_permission_leaves_the_file_alone_and_runs_nothing(launch, project):
    agent, session_id, result = run_prompt(
        launch, project, f"file: app.py\nreplace: return 1\nwith: return 2\nrun: {CHECK}", coding_client(permission="reject"))
    assert result == {"stopReason": "end_turn"}
    assert (project / "app.py").read_text() == "def f():\n    return 1\n"
    assert "fs/write_text_file" not in methods(agent) and "terminal/create" not in methods(agent)
    assert final_statuses(agent, session_id) == {"read": "completed", "edit": "failed"}


def test_a_client_without_terminals_is_told_so_before_anything_is_asked(launch, project):
    policy = ClientPolicy(capabilities={"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False}, use_disk=True)
    agent, session_id, result = run_prompt(launch, project, "file: app.py\nreplace: 1\nwith: 2\nrun: true", policy)
    assert result == {"stopReason": "end_turn"}
    assert agent.agent_requests == []
    assert "cannot run terminals" in said(agent.updates(session_id))


def test_text_not_in_the_file_changes_nothing_and_asks_nothing(launch, project):
    agent, session_id, result = run_prompt(launch, project, "file: app.py\nreplace: return 9\nwith: x", coding_client())
    assert result == {"stopReason": "end_turn"}
    assert methods(agent) == ["fs/read_text_file"]
    assert "does not contain" in said(agent.updates(session_id))


def test_cancel_during_the_check_kills_its_terminal_and_ends_every_tool_call(launch, project):
    """S5: cancel mid-command: the turn answers `cancelled`, the check's command is killed
    (its terminal released), and every tool call ends completed or failed, none left running."""
    agent = launch(command=[sys.executable, EXAMPLE, "--state-dir", str(project / ".state")], policy=coding_client())
    agent.initialize()
    session_id = agent.new_session(cwd=str(project))
    pending = agent.prompt(session_id, "file: app.py\nreplace: return 1\nwith: return 2\n"
                                       "run: python3 -c 'import time; time.sleep(600)'")
    terminal = agent.wait_for(lambda: next(iter(agent.terminal_host.terminals.values()), None), timeout=120, what="the check's terminal")
    agent.cancel(session_id)
    assert pending.result(timeout=120) == {"stopReason": "cancelled"}
    agent.wait_for(lambda: terminal.proc.poll() is not None, timeout=60, what="the check's command to be killed")
    assert "terminal/release" in methods(agent)
    statuses = final_statuses(agent, session_id)
    assert set(statuses) == {"read", "edit", "execute"} and set(statuses.values()) <= {"completed", "failed"}, statuses
    assert statuses["execute"] == "failed"


def test_a_write_the_client_refuses_fails_the_edit_and_runs_nothing(launch, project):
    def refuses(client: AcpClient, request: dict[str, Any]) -> None:
        client.respond_error(request["id"], {"code": -32603, "message": "disk full"})

    policy = ClientPolicy.coding(use_disk=True, handlers={"fs/write_text_file": refuses})
    agent, session_id, result = run_prompt(launch, project, f"file: app.py\nreplace: return 1\nwith: return 2\nrun: {CHECK}", policy)
    assert result == {"stopReason": "end_turn"}
    assert "terminal/create" not in methods(agent)
    assert final_statuses(agent, session_id) == {"read": "completed", "edit": "failed"}
    assert (project / "app.py").read_text() == "def f():\n    return 1\n"


def test_a_run_command_with_unbalanced_quotes_is_said_and_asks_nothing(launch, project):
    agent, session_id, result = run_prompt(launch, project, "file: app.py\nreplace: return 1\nwith: return 2\nrun: echo 'oops",
                                           coding_client())
    assert result == {"stopReason": "end_turn"}
    assert agent.agent_requests == []
    assert "cannot split `run: echo 'oops`" in said(agent.updates(session_id))


def test_a_path_outside_the_sessions_cwd_is_shown_absolute_in_the_permission_asked(launch, project):
    """`..` may leave the cwd (the client decides what it serves): the read, the diff and the
    permission all name the file's real absolute location, so the user sees where it is."""
    outside = project.parent / f"{project.name}-outside.py"
    outside.write_text("x = 1\n")
    agent, session_id, result = run_prompt(launch, project, f"file: ../{outside.name}\nreplace: x = 1\nwith: x = 2", coding_client())
    assert result == {"stopReason": "end_turn"}
    (asked,) = [r for r in agent.agent_requests if r["method"] == "session/request_permission"]
    assert asked["params"]["toolCall"]["content"][0]["path"] == str(outside)
    assert outside.read_text() == "x = 2\n"


def test_in_process_through_the_testing_plugin_a_cancel_when_the_check_starts_kills_it(acp_connect):
    """The example served in process by acp_green.testing, as its author would test it: the edit
    is made after permission; a cancel sent when the check's terminal is embedded in its tool call
    ends the turn `cancelled`, the command killed and released, no tool call left running (S5,
    S14). The plugin checks every rule of the conversation when the test returns."""
    client = acp_connect(example_module().CodingAgent, files={"app.py": "def f():\n    return 1\n"})
    session_id = client.new_session()
    running = client.start_prompt(session_id, "file: app.py\nreplace: return 1\nwith: return 2\nrun: sleep 60")
    running.wait_for_update(lambda u: any(c.get("type") == "terminal" for c in u.get("content") or []))
    running.cancel()
    turn = running.wait()
    assert turn.stop_reason == "cancelled"
    assert (client.workspace / "app.py").read_text() == "def f():\n    return 2\n"
    assert [t.argv for t in client.terminals] == [["sleep", "60"]]
    assert client.terminals[0].killed and client.terminals[0].released
    assert {call.kind: call.status for call in turn.tool_calls} == {"read": "completed", "edit": "completed", "execute": "failed"}


line_text = st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp")), min_size=1).map(str.strip).filter(bool)


@settings(deadline=None, max_examples=200)
@given(path=line_text, old=line_text, new=st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"))).map(str.strip),
       noise=st.lists(st.text(st.characters(blacklist_categories=("Cs", "Cc", "Zl", "Zp"))).filter(lambda s: ":" not in s)))
def test_a_prompt_names_its_change_whatever_surrounds_it(path, old, new, noise):
    """Prompt boundary: the four fields are read from their lines whatever else the prompt says;
    a missing field is a ValueError naming it, never a crash."""
    parse_change = example_module().parse_change
    change = parse_change("\n".join([*noise, f"file: {path}", f"replace: {old}", f"with: {new}"]))
    assert (change.path, change.old, change.new, change.command) == (path, old, new, [])
    with pytest.raises(ValueError, match="replace"):
        parse_change("\n".join([*noise, f"file: {path}", f"with: {new}"]))


def test_the_probe_finds_nothing_wrong_and_exercises_its_file_path(tmp_path):
    """`acp-green probe -- python examples/coding_agent.py` with a tool prompt: no row fails, the
    tool prompt makes it send a file path (absolute, checked) and finish its tool call. The rows
    that need a prompt running until cancelled say so: this agent has none."""
    import json
    import subprocess

    done = subprocess.run(
        [sys.executable, "-m", "acp_green", "probe", "--json", "--tool-prompt", "file: notes.txt\nreplace: a\nwith: b",
         "--", sys.executable, EXAMPLE, "--state-dir", str(tmp_path / "state")],
        capture_output=True, text=True, timeout=600, cwd=str(tmp_path))
    report = json.loads(done.stdout)
    rows = {row["check"]: row for row in report["checks"] + report.get("advisories", [])}
    assert done.returncode == 0 and not [r for r in rows.values() if r["verdict"] == "fail"], rows
    assert rows["file paths sent to the client are absolute"]["verdict"] == "pass", rows
    assert rows["tool calls finish before the prompt response"]["verdict"] == "pass", rows
    assert "fs/read_text_file" in rows["a prompt that uses a tool"]["evidence"]
