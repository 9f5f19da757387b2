"""README.md is a quickstart that works: it opens with the two commands and then the four steps of
a first agent (write it, talk to it, point an editor at it, test it), every command of those steps
runs as written, and the reference it leaves to docs/ is linked and complete there."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers import REPO, said

README = REPO / "README.md"
DOCS = REPO / "docs"
#: The quickstart's steps after the install, in order: the sections whose commands must run as written.
QUICKSTART = ("## Your first agent", "## Point an editor at it", "## Test it")
#: Where the README's example settings put the checkout (any absolute path in the user's own).
PLACEHOLDER = "/home/you/acp_green/"


def section(text: str, heading: str) -> str:
    """From `heading` to the next `## ` heading."""
    start = text.index(f"\n{heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def python_file(name: str) -> str:
    """The README's python block that starts with `# name`."""
    [block] = [b for b in blocks(README.read_text(encoding="utf-8"), "python") if b.startswith(f"# {name}\n")]
    return block


def example_source() -> str:
    return python_file("hello_agent.py")


def test_readme_example_agent_runs(launch, tmp_path):
    (tmp_path / "hello_agent.py").write_text(example_source(), encoding="utf-8")
    agent = launch(command=[sys.executable, "-c",
                            f"import sys; sys.path.insert(0, {str(tmp_path)!r}); sys.argv = ['acp-green', 'serve', '--agent', 'hello_agent:HelloAgent']; "
                            "from acp_green.__main__ import main; main()"])
    agent.initialize()
    sid = agent.new_session()
    assert agent.prompt(sid, "ping").result() == {"stopReason": "end_turn"}
    text = said(agent.updates(sid))
    assert text == "Hello, you said: ping"
    assert agent.call("session/set_mode", {"sessionId": sid, "modeId": "terse"}) == {}
    waiting = agent.prompt(sid, "x")
    assert waiting.result() == {"stopReason": "end_turn"}


def readme_commands() -> list[str]:
    """The commands of the README's "The two commands" section, in order."""
    return [block.strip() for block in blocks(section(README.read_text(encoding="utf-8"), "## The two commands"), "sh")]


def test_readme_states_the_two_commands():
    """Exactly two commands, each a script of this repository that exists and is executable."""
    assert readme_commands() == ["scripts/run.sh", "scripts/test.sh"]
    root = README.parent
    for command in readme_commands():
        assert (root / command).is_file() and os.access(root / command, os.X_OK), command


def test_the_readme_opens_with_the_quickstart():
    """The first screen is the quickstart: install, the hello agent, an editor, a test; the
    reference is a list of links into docs/, which links every page there."""
    text = README.read_text(encoding="utf-8")
    headings = re.findall(r"^## .*$", text, re.M)
    assert headings == ["## The two commands", *QUICKSTART, "## Reference"]
    lines = text.splitlines()
    assert lines.index("# hello_agent.py") < 60, "the first runnable agent starts on the first screen"
    assert lines.index("## Reference") < 130, "the four steps fit before the reference"
    assert len(text.encode()) < 10_000, "reference material goes to docs/, not the README"
    reference = section(text, "## Reference")
    linked = set(re.findall(r"\]\(docs/([\w.-]+\.md)[#)]", reference))
    assert sorted(page.name for page in DOCS.glob("*.md") if page.name not in linked) == []


def test_the_readme_points_at_blocking_code_is_fine_in_the_writing_guide():
    text = README.read_text(encoding="utf-8")
    assert "](docs/WRITING-AGENTS.md#blocking-code-is-fine)" in section(text, "## Your first agent")
    assert "\n### Blocking code is fine\n" in (DOCS / "WRITING-AGENTS.md").read_text(encoding="utf-8")


def quickstart_commands() -> list[str]:
    """Every line of the quickstart's sh blocks, in order."""
    text = README.read_text(encoding="utf-8")
    return [line for heading in QUICKSTART for block in blocks(section(text, heading), "sh")
            for line in block.splitlines() if line.strip()]


def _like_the_readme(shown: Any, printed: Any, where: str = "") -> list[str]:
    """Where `printed` differs from the settings the README shows: the same keys and values,
    except that each path under PLACEHOLDER is an absolute path ending the same way."""
    if isinstance(shown, dict):
        if not isinstance(printed, dict) or set(shown) != set(printed):
            return [f"{where}: keys {sorted(shown)} != {printed!r}"]
        return [d for key in shown for d in _like_the_readme(shown[key], printed[key], f"{where}.{key}")]
    if isinstance(shown, list):
        if not isinstance(printed, list) or len(shown) != len(printed):
            return [f"{where}: {shown!r} != {printed!r}"]
        return [d for i, (a, b) in enumerate(zip(shown, printed)) for d in _like_the_readme(a, b, f"{where}[{i}]")]
    if isinstance(shown, str) and shown.startswith(PLACEHOLDER):
        ok = isinstance(printed, str) and os.path.isabs(printed) and printed.endswith("/" + shown[len(PLACEHOLDER):])
        return [] if ok else [f"{where}: {printed!r} is not an absolute ...{shown[len(PLACEHOLDER) - 1:]}"]
    return [] if shown == printed else [f"{where}: {shown!r} != {printed!r}"]


def test_every_quickstart_command_runs_as_written(tmp_path):
    """In a scratch checkout whose `.venv` is this environment, with the README's hello_agent.py
    and test_hello_agent.py: chat answers a prompt, the probe passes, editor-config prints the
    settings the README shows (JetBrains' the same without `type`), and the test passes."""
    checkout = tmp_path / "acp_green"
    checkout.mkdir()
    (checkout / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    (checkout / "tox.ini").write_bytes((REPO / "tox.ini").read_bytes())  # the checkout's pytest settings
    assert (checkout / ".venv" / "bin" / "acp-green").exists(), "acp-green is installed in this environment"
    for name in ("hello_agent.py", "test_hello_agent.py"):
        (checkout / name).write_text(python_file(name), encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST_", "COV_"))}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")  # where `serve` keeps the chat's session
    [settings] = blocks(section(README.read_text(encoding="utf-8"), "## Point an editor at it"), "json")
    settings = json.loads(settings)

    checks = {
        "acp-green chat ": lambda out: "Hello, you said: ping" in out,
        "acp-green probe ": lambda out: " 0 failed" in out,
        "acp-green editor-config zed ": lambda out: _like_the_readme(settings, json.loads(out)) == [],
        "python -m pytest test_hello_agent.py": lambda out: "1 passed" in out,
        "pip install pytest": lambda out: "pytest" in out,  # here already installed: pip says so, offline
    }
    seen = []
    for command in quickstart_commands():
        kinds = [kind for kind in checks if kind in command]
        assert len(kinds) == 1, f"a quickstart command this test does not check: {command}"
        [kind] = kinds
        run = subprocess.run(["bash", "-c", command], cwd=checkout, env=env, input="ping\n",
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, (command, run.stdout[-3000:], run.stderr[-3000:])
        assert checks[kind](run.stdout), (command, run.stdout[-3000:])
        seen.append(kind)
    assert sorted(seen) == sorted(checks)

    jetbrains = subprocess.run([str(checkout / ".venv" / "bin" / "acp-green"), "editor-config", "jetbrains", "--name", "hello",
                                "--agent", "hello_agent.py:HelloAgent"], cwd=checkout, env=env, capture_output=True, text=True,
                               timeout=120, check=True)
    without_type = json.loads(json.dumps(settings))
    del without_type["agent_servers"]["hello"]["type"]
    assert _like_the_readme(without_type, json.loads(jetbrains.stdout)) == []


def test_every_serve_option_has_its_row_in_the_serving_guide():
    """docs/SERVE.md's `acp-green serve` options table names every option `serve --help` lists."""
    from acp_green.cli import serve

    table = section((DOCS / "SERVE.md").read_text(encoding="utf-8"), "## `acp-green serve` options")
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    missing = [param.opts for param in serve.params
               if param.opts and param.opts[0] != "--help"
               and not any(f"`{name}" in row.split("|")[1] for name in param.opts + param.secondary_opts for row in rows)]
    assert missing == []
