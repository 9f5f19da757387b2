"""What someone new to acp-green meets first: `serve --agent` refuses every unusable spec in one
line (exit 2, no traceback) and takes a .py file; `serve` at a terminal says what it is;
`editor-config` prints settings whose command runs; a mistyped --state-dir is an error; `usage
--json` speaks camelCase."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green import editorconfig
from acp_green.agentspec import AgentSpecError, absolute_spec, split_spec
from acp_green.cli import tty_hint

AGENTS = '''
from acp_green import Agent


class Fine(Agent):
    name = "fine"

    def prompt(self, turn):
        turn.say("fine here")
        return "end_turn"


class NeedsModel(Agent):
    def __init__(self, model):
        self.model = model

    def prompt(self, turn):
        return "end_turn"


class NoPrompt(Agent):
    name = "no-prompt"


def broken_factory():
    raise RuntimeError("no API key:\\nset OPENAI_API_KEY")


not_an_agent = 42


class PromptNotCallable(Agent):
    prompt = "say hello"


class ExitsWhenMade(Agent):
    def __init__(self):
        raise SystemExit(0)

    def prompt(self, turn):
        return "end_turn"
'''
LOUD_AGENT = '''
import os
print("loud at import")
os.write(1, b"raw at import\\n")
from acp_green import Agent


class Loud(Agent):
    name = "loud"

    def __init__(self):
        print("loud when made")

    def prompt(self, turn):
        return "end_turn"
'''
INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}) + "\n"
CONSOLE_SCRIPT = os.path.join(os.path.dirname(sys.executable), "acp-green")


def acp_green(*args: str, cwd: Path | str | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    """`python -m acp_green ARGS` with stdin closed after `stdin` (nothing by default)."""
    return subprocess.run([sys.executable, "-m", "acp_green", *args], cwd=cwd, input=stdin or "",
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def agents_dir(tmp_path: Path) -> Path:
    (tmp_path / "my_agents.py").write_text(AGENTS)
    (tmp_path / "broken_module.py").write_text("import nosuchdep_xyz\n")
    (tmp_path / "exits_quietly.py").write_text("import sys\nsys.exit(0)\n")
    (tmp_path / "exits_loudly.py").write_text("import sys\nsys.exit('no config:\\nbye')\n")
    (tmp_path / "bad_syntax.py").write_text("def f(:\n")
    return tmp_path


@pytest.mark.parametrize(("spec", "said"), [
    ("json:dumps", "json:dumps needs arguments (obj)"),
    ("json:JSONDecoder", "json:JSONDecoder is the class JSONDecoder, not an acp_green.Agent subclass"),
    ("my_agents:NeedsModel", "NeedsModel() needs arguments (model)"),
    ("my_agents:NoPrompt", "my_agents:NoPrompt: NoPrompt does not implement prompt(turn)"),
    ("my_agents:broken_factory", "creating the agent from my_agents:broken_factory failed: RuntimeError: no API key: set OPENAI_API_KEY"),
    ("my_agents:not_an_agent", "my_agents:not_an_agent is a int, not an acp_green.Agent"),
    ("my_agents:Missing", "my_agents has no attribute 'Missing'"),
    ("my_agents.py:NeedsModel", "NeedsModel() needs arguments (model)"),
    ("broken_module:X", "cannot import broken_module: ModuleNotFoundError: No module named 'nosuchdep_xyz'"),
    ("nosuch_module_xyz:Agent", "cannot import nosuch_module_xyz: no module of that name"),
    ("exits_quietly.py:Agent", "exits_quietly.py: SystemExit: 0"),
    ("exits_quietly:Agent", "cannot import exits_quietly: SystemExit: 0"),
    ("exits_loudly.py:Agent", "exits_loudly.py: SystemExit: no config: bye"),
    ("bad_syntax.py:Agent", "bad_syntax.py: SyntaxError: invalid syntax"),
    ("my_agents:ExitsWhenMade", "creating the agent from my_agents:ExitsWhenMade failed: SystemExit: 0"),
    ("my_agents:PromptNotCallable", "PromptNotCallable does not implement prompt(turn)"),
    ("missing_file.py:Agent", "no such file:"),
    ("no_colon", "expected MODULE:ATTR or path/to/file.py:ATTR"),
])
def test_an_unusable_agent_spec_is_one_line_and_exit_2(agents_dir, spec, said):
    done = acp_green("serve", "--ephemeral", "--agent", spec, cwd=agents_dir, stdin=INITIALIZE)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""  # refused before anything was read or answered
    assert done.stderr.startswith("Error: --agent: ") and done.stderr.count("\n") == 1, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr


def test_an_agent_given_as_a_file_path_serves_from_any_directory(launch, agents_dir, tmp_path_factory):
    """path/to/file.py:ATTR imports the file itself, relative to the working directory."""
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    relative = os.path.relpath(agents_dir / "my_agents.py", elsewhere)
    agent = launch(command=[sys.executable, "-c",
                            f"import os, sys; os.chdir({str(elsewhere)!r}); "
                            f"sys.argv = ['acp-green', 'serve', '--ephemeral', '--agent', {relative + ':Fine'!r}]; "
                            "from acp_green.__main__ import main; main()"])
    assert agent.initialize()["agentInfo"]["name"] == "fine"
    sid = agent.new_session()
    assert agent.prompt(sid, "hi").result() == {"stopReason": "end_turn"}


@pytest.mark.parametrize("directory", ["with:colon", "with space é"])
def test_an_agent_file_in_a_directory_with_a_colon_or_spaces_and_unicode_serves(agents_dir, directory):
    """The spec splits at its last ':', so a directory may hold one; the path goes through as given."""
    folder = agents_dir / directory
    folder.mkdir()
    (folder / "agent.py").write_text(AGENTS)
    done = acp_green("serve", "--ephemeral", "--agent", f"{folder}/agent.py:Fine", stdin=INITIALIZE)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"]["agentInfo"]["name"] == "fine"


def test_what_an_agent_prints_while_it_loads_goes_to_stderr_never_the_wire(agents_dir):
    """Stdout is the wire: a module that prints, or writes fd 1, at import or in its
    constructor leaves serve's stdout pure JSON-RPC and editor-config's stdout pure JSON."""
    (agents_dir / "loud.py").write_text(LOUD_AGENT)
    done = acp_green("serve", "--ephemeral", "--agent", "loud.py:Loud", cwd=agents_dir, stdin=INITIALIZE)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"]["agentInfo"]["name"] == "loud"
    assert {"loud at import", "raw at import", "loud when made"} <= set(done.stderr.splitlines())
    done = acp_green("editor-config", "zed", "--agent", "loud.py:Loud", cwd=agents_dir)
    assert done.returncode == 0, done.stderr
    assert "loud.py:Loud" in json.loads(done.stdout)["agent_servers"]["acp-green"]["args"][-1]
    assert "loud when made" in done.stderr


def test_serve_at_a_terminal_says_what_it_is_and_ends_on_ctrl_d():
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "acp_green", "serve", "--ephemeral"],
                            stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.close(slave)
    try:
        ready, _, _ = select.select([proc.stderr], [], [], 60)
        assert ready, "nothing on stderr within 60 s"
        assert proc.stderr.readline().decode() == tty_hint() + "\n"
        os.write(master, b"\x04")  # Ctrl-D at the start of a line: EOF on the terminal
        assert proc.wait(timeout=60) == 0
        assert proc.stdout.read() == b""
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
        proc.stdout.close()
        proc.stderr.close()


def test_serve_on_a_pipe_says_nothing_on_stderr():
    """The hint is for a person at a terminal; an editor's pipe gets the ACP answers alone."""
    done = acp_green("serve", "--ephemeral", stdin=INITIALIZE)
    assert done.returncode == 0 and done.stderr == ""
    assert json.loads(done.stdout)["result"]["protocolVersion"] == 1


def test_editor_config_for_zed_launches_this_installation_from_anywhere(agents_dir, tmp_path_factory):
    """The printed command is this environment's console script, absolute; --agent and
    --state-dir are made absolute; run exactly as printed from another directory, it serves."""
    assert os.access(CONSOLE_SCRIPT, os.X_OK), "the package is installed in the environment running the tests"
    done = subprocess.run([CONSOLE_SCRIPT, "editor-config", "zed", "--agent", "my_agents.py:Fine", "--state-dir", "state"],
                          cwd=agents_dir, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "settings.json" in done.stderr
    entry = json.loads(done.stdout)["agent_servers"]["acp-green"]
    assert entry == {"type": "custom", "command": CONSOLE_SCRIPT, "env": {},
                     "args": ["serve", "--agent", f"{agents_dir}/my_agents.py:Fine", "--state-dir", f"{agents_dir}/state"]}
    served = subprocess.run([entry["command"], *entry["args"]], cwd=tmp_path_factory.mktemp("editor-cwd"),
                            input=INITIALIZE, capture_output=True, text=True, timeout=120)
    assert served.returncode == 0, served.stderr
    assert json.loads(served.stdout)["result"]["agentInfo"]["name"] == "fine"


def test_editor_config_for_jetbrains_from_python_m_names_the_console_script(tmp_path):
    done = acp_green("editor-config", "jetbrains", "--name", "demo", "--log-level", "INFO", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "acp.json" in done.stderr
    assert json.loads(done.stdout) == {"agent_servers": {"demo": {
        "command": CONSOLE_SCRIPT, "args": ["serve", "--log-level", "INFO"], "env": {}}}}


def test_editor_config_record_puts_the_recorder_in_front_one_trace_file_per_launch(tmp_path, tmp_path_factory):
    """--record DIR: the printed command runs `record --out-dir DIR -- <this acp-green> serve ...`
    (DIR absolute); run as printed from elsewhere, each launch serves and leaves its own trace."""
    done = acp_green("editor-config", "zed", "--record", "traces", "--ephemeral", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    entry = json.loads(done.stdout)["agent_servers"]["acp-green"]
    traces = tmp_path / "traces"
    assert entry["command"] == CONSOLE_SCRIPT
    assert entry["args"] == ["record", "--out-dir", str(traces), "--", CONSOLE_SCRIPT, "serve", "--ephemeral"]
    for _launch in range(2):
        served = subprocess.run([entry["command"], *entry["args"]], cwd=tmp_path_factory.mktemp("editor-cwd"),
                                input=INITIALIZE, capture_output=True, text=True, timeout=120)
        assert served.returncode == 0, served.stderr
        assert json.loads(served.stdout)["result"]["protocolVersion"] == 1
    files = sorted(traces.iterdir())
    assert len(files) == 2 and all(re.fullmatch(r"acp-trace-\d{8}T\d{6}\.\d{3}Z-\d+\.jsonl", f.name) for f in files), files
    for path in files:
        methods = [json.loads(line).get("method") for line in path.read_text().splitlines()]
        assert "initialize" in methods


def test_editor_config_refuses_what_serve_would_refuse(agents_dir):
    done = acp_green("editor-config", "zed", "--agent", "my_agents:NoPrompt", cwd=agents_dir)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "does not implement prompt(turn)" in done.stderr
    done = acp_green("editor-config", "zed", "--max-background", "0", cwd=agents_dir)
    assert done.returncode == 2 and done.stdout == "" and "--max-background" in done.stderr


def test_without_a_console_script_the_editor_runs_python_m_acp_green(monkeypatch, tmp_path):
    """An environment without the `acp-green` script (an unusual install) still gets a command that works."""
    monkeypatch.setattr(sys, "argv", [str(tmp_path / "acp_green" / "__main__.py")])
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python3"))
    assert editorconfig.launcher() == (str(tmp_path / "bin" / "python3"), ["-m", "acp_green"])


def test_a_mistyped_state_dir_is_one_line_and_exit_1_an_empty_one_a_note_and_exit_0(tmp_path):
    for command in (("usage",), ("usage", "--json"), ("sessions", "list"), ("sessions", "show", "x"), ("sessions", "export")):
        done = acp_green(*command, "--state-dir", str(tmp_path / "typo"))
        assert (done.returncode, done.stdout) == (1, ""), command
        assert done.stderr == f"Error: no directory {tmp_path / 'typo'} (check --state-dir)\n", command
    done = acp_green("usage", "--json", "--state-dir", str(tmp_path))
    assert done.returncode == 0 and done.stderr == f"nothing is stored in {tmp_path} yet (no state database there)\n"
    assert json.loads(done.stdout)["totals"]["prompts"] == 0
    assert not (tmp_path / "typo").exists()


CAMEL_CASE = re.compile(r"[a-z]+(?:[A-Z][a-z0-9]*)*")


def _keys(value: object, path: str = "") -> list[tuple[str, str]]:
    """Every (path, key) of a JSON value, except the stop reasons that key byStopReason (ACP's own words)."""
    found = []
    if isinstance(value, dict):
        for key, inner in value.items():
            found.append((path, key))
            if key != "byStopReason":
                found.extend(_keys(inner, f"{path}.{key}"))
    elif isinstance(value, list):
        for inner in value:
            found.extend(_keys(inner, f"{path}[]"))
    return found


def test_usage_json_is_camel_case_throughout(launch, tmp_path):
    """S16: the usage ledger's JSON (totals, per session, every record) uses one convention, ACP's."""
    agent = launch("--state-dir", str(tmp_path))
    agent.initialize()
    sid = agent.new_session()
    assert agent.prompt(sid, "hello").result() == {"stopReason": "end_turn"}
    agent.close()
    done = acp_green("usage", "--json", "--records", "--state-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    [record] = report["records"]
    assert {"sessionId", "requestId", "stopReason", "inputBytes", "outputBytes", "usageId", "startedAt"} <= set(record)
    assert record["sessionId"] == sid and record["stopReason"] == "end_turn"
    bad = [(path, key) for path, key in _keys(report) if not CAMEL_CASE.fullmatch(key)]
    assert not bad, bad


SPEC_TEXT = st.text(st.sampled_from("ab_.:/~ 1"), max_size=24)


@settings(deadline=None, max_examples=300)
@given(SPEC_TEXT)
def test_a_spec_splits_at_its_last_colon_or_is_refused(spec):
    try:
        source, attr = split_spec(spec)
    except AgentSpecError as exc:
        assert str(exc).startswith("expected MODULE:ATTR or path/to/file.py:ATTR")
        return
    assert f"{source}:{attr}" == spec and ":" not in attr and source and attr


@settings(deadline=None, max_examples=300)
@given(SPEC_TEXT, st.sampled_from(["/srv/project", "/tmp/other dir"]))
def test_an_absolute_spec_means_the_same_from_any_directory(spec, cwd):
    """Made absolute once, a spec no longer depends on the directory it is read from."""
    try:
        fixed = absolute_spec(spec, cwd)
    except AgentSpecError:
        return
    assert absolute_spec(fixed, "/somewhere/else") == fixed
    source, _ = split_spec(fixed)
    assert os.path.isabs(source) or fixed == spec  # a module name stays a module name


def test_serve_at_a_terminal_names_the_commands_by_the_path_it_was_started_by():
    """Started as .venv/bin/acp-green (not on PATH), the hint's commands are that path, so each
    runs as printed."""
    command = os.path.join(os.path.dirname(sys.executable), "acp-green")
    master, slave = pty.openpty()
    proc = subprocess.Popen([command, "serve", "--ephemeral"], stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    os.close(slave)
    try:
        ready, _, _ = select.select([proc.stderr], [], [], 60)
        assert ready, "nothing on stderr within 60 s"
        hint = proc.stderr.readline().decode()
        assert f"run `{command} chat`" in hint and f"`{command} editor-config zed`" in hint, hint
        os.write(master, b"\x04")
        assert proc.wait(timeout=60) == 0
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
