"""The patching A/B that docs/PERFORMANCE.md gives for `acp-green bench` is runnable as written:
both agents are named acp-green (so every workload runs on them), the default one patches and the
other opts out, and `serve` accepts each command's options."""

from __future__ import annotations

import re

from acp_green.tools.bench.app import BenchSettings, choose_agents
from acp_green.cli import serve
from tests.helpers import REPO


def documented_agents() -> list[str]:
    text = (REPO / "docs" / "PERFORMANCE.md").read_text(encoding="utf-8")
    section = text[text.index("## Monkey-patching, on by default"):]
    return re.findall(r'--agent "([^"]+)"', section)


def test_the_documented_ab_runs_a_patched_and_an_unpatched_acp_green():
    specs = documented_agents()
    assert len(specs) == 2, specs
    settings = BenchSettings(agents=tuple(specs), only=(), workloads=("W1",), repeat=1, scale=1.0, json_path=None,
                             chart_path=None, install=False, cache_dir=REPO, peers_dir=REPO, ceiling=False, read_pause=0.0)
    agents = choose_agents(settings).agents
    assert all(agent.is_acp_green for agent in agents)
    patched, unpatched = agents
    assert "--no-monkey-patch" not in patched.command and "--no-monkey-patch" in unpatched.command
    for agent in agents:
        serve_args = list(agent.command[agent.command.index("serve") + 1:])
        with serve.make_context("serve", serve_args) as ctx:
            assert ctx.params["monkey_patch"] is (agent is patched)
