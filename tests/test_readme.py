"""The README's example agent is real: extract it, serve it through the CLI, talk to it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from tests.helpers import said

README = Path(__file__).resolve().parent.parent / "README.md"


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


def test_readme_states_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert "python3 -m pip install . && acp-green serve" in text
    assert "scripts/test.sh" in text
