"""How long a cancel of plain blocking agent code takes to be answered, per kind of blocking call.

Serves tests/blocking_agents.py through the real `acp-green serve` (default patching, the
default cancel grace unless --cancel-grace is given) and, for each case, N times: starts a turn
that blocks, waits until it is blocked, sends `session/cancel` and times until the prompt's
`cancelled` answer is read. The model calls go to a local model that sends one chunk and then
nothing (tests/fake_openai.py `/silent`), through urllib, requests, httpx and the openai client;
`time.sleep(60)` and `subprocess.run` of a 60 s child complete the table. Prints, per case, the
median, p90 and max in milliseconds, and the grace they include.

    .venv/bin/python scripts/cancel_latency.py [-n 20] [--cancel-grace 0.5]
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402 - after patching: the fake model is a gevent server in this process
import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from acp_green.tools.rig.client import AgentProcess  # noqa: E402
from tests.fake_openai import FakeOpenAI  # noqa: E402
from tests.helpers import said  # noqa: E402

LIBRARIES = ("urllib", "requests", "httpx", "openai")


def cancel_once(agent: AgentProcess, prompt: str, started: str) -> float:
    """Seconds from the cancel to the `cancelled` answer of one blocked turn."""
    sid = agent.new_session()
    call = agent.prompt(sid, prompt)
    agent.wait_for(lambda: said(agent.updates(sid)) == started, what=f"{prompt!r} to block")
    time.sleep(0.05)  # well inside the blocking call
    begun = time.perf_counter()
    agent.cancel(sid)
    result = call.result(timeout=60)
    elapsed = time.perf_counter() - begun
    if result != {"stopReason": "cancelled"}:
        raise SystemExit(f"{prompt!r} answered {result!r}, not cancelled")
    return elapsed


def measure(agent_name: str, cases: dict[str, tuple[str, str]], rounds: int, grace: str | None, env: dict[str, str]) -> None:
    args = ["--ephemeral", "--agent", agent_name] + (["--cancel-grace", grace] if grace else [])
    agent = AgentProcess([sys.executable, "-m", "acp_green", "serve", *args], env={**os.environ, **env})
    try:
        agent.initialize()
        for case, (prompt, started) in cases.items():
            times = [cancel_once(agent, prompt, started) * 1000 for _ in range(rounds)]
            times.sort()
            p90 = times[min(len(times) - 1, int(len(times) * 0.9))]
            print(f"| {case} | {statistics.median(times):.0f} | {p90:.0f} | {times[-1]:.0f} |", flush=True)
    finally:
        agent.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=20, help="cancels per case")
    parser.add_argument("--cancel-grace", default=None, help="passed to acp-green serve (default: its own)")
    options = parser.parse_args()
    model = FakeOpenAI()
    grace = options.cancel_grace or "0.5 (default)"
    print(f"cancel -> answer, ms, {options.n} cancels each, --cancel-grace {grace}", flush=True)
    print("| blocked in | median | p90 | max |\n|---|---|---|---|", flush=True)
    try:
        measure("tests.blocking_agents:ModelCallAgent",
                {f"{library}: silent model stream": (f"{library} /silent", "thinking") for library in LIBRARIES},
                options.n, options.cancel_grace, {"OPENAI_BASE_URL": model.url})
        with tempfile.TemporaryDirectory() as scratch:
            measure("tests.blocking_agents:SleepingAgent",
                    {"time.sleep(60)": ("long sleep", "sleeping"),
                     "subprocess.run (60 s child)": (f"child {scratch}/pid", "starting")},
                    options.n, options.cancel_grace, {})
    finally:
        model.stop()


if __name__ == "__main__":
    main()
