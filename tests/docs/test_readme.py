"""The README's example agent is real: extract it, serve it through the CLI, talk to it."""

from __future__ import annotations

import os
import re
import sys

from tests.helpers import REPO, said

README = REPO / "README.md"


def example_source() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    [block] = [b for b in blocks if "# hello_agent.py" in b]
    return block


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
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## The two commands"):]
    section = section[:section.index("\n## ", 1)]
    return [block.strip() for block in re.findall(r"```sh\n(.*?)```", section, re.S)]


def test_readme_states_the_two_commands():
    """Exactly two commands, each a script of this repository that exists and is executable."""
    assert readme_commands() == ["scripts/run.sh", "scripts/test.sh"]
    root = README.parent
    for command in readme_commands():
        assert (root / command).is_file() and os.access(root / command, os.X_OK), command


def test_every_serve_option_has_its_row_in_the_readme():
    """The README's `acp-green serve` options table names every option `serve --help` lists."""
    from acp_green.cli import serve

    text = README.read_text(encoding="utf-8")
    table = text[text.index("## `acp-green serve` options"):]
    table = table[:table.index("\n## ", 1)]
    rows = [line for line in table.splitlines() if line.startswith("| `")]
    missing = [param.opts for param in serve.params
               if param.opts and param.opts[0] != "--help"
               and not any(f"`{name}" in row.split("|")[1] for name in param.opts + param.secondary_opts for row in rows)]
    assert missing == []
