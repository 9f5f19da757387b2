"""How late control answers are while a session's stdio MCP servers start.

Launches `acp-green serve`, opens one session declaring N stdio MCP servers, then calls the
`echo` tool of each server in turn from prompts (`/mcp sI echo`) while sending a `session/list`
every few milliseconds. Prints the answer latencies of those control requests, how long until
every server had answered, and the agent's peak descriptor count.

    .venv/bin/python scripts/mcp_start_latency.py --servers 500 [--server sed|python|sdk]

The default stand-in server is `sed` answering `initialize` and `tools/call` (a process that
costs almost nothing to start), so the figure is the agent's own stall, not CPU contention with
the children; `python` is a stdlib-only MCP server, `sdk` one on the official `mcp` SDK.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import gevent

from acp_green.tools.bench.stats import percentile
from acp_green.tools.rig.client import AgentProcess

#: Answers `initialize` and `tools/call` (our requests put "id" before "method"); ignores the rest.
def _sed_answer(method: str, result: str) -> str:
    return f's/^{{"jsonrpc":"2.0","id":\\([0-9]*\\),"method":"{method}".*/{{"jsonrpc":"2.0","id":\\1,"result":{result}}}/p'


SED_SERVER = ["sed", "-un",
              "-e", _sed_answer("initialize", '{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"sed","version":"1"}}'),
              "-e", _sed_answer("tools\\/call", '{"content":[{"type":"text","text":"ok"}]}')]
_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "mcp_servers")
SERVERS = {"sed": SED_SERVER, "python": [sys.executable, os.path.join(_TESTS, "recorder.py")],
           "sdk": [sys.executable, os.path.join(_TESTS, "sdk_tools.py")]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, default=500)
    parser.add_argument("--server", choices=sorted(SERVERS), default="sed")
    parser.add_argument("--interval", type=float, default=0.005, help="seconds between control requests")
    parser.add_argument("--no-cap-option", action="store_true", help="for a build without --max-mcp-servers")
    args = parser.parse_args()
    argv = SERVERS[args.server]
    entries = [{"name": f"s{i}", "command": argv[0], "args": argv[1:], "env": []} for i in range(args.servers)]
    command = [sys.executable, "-m", "acp_green", "serve", "--ephemeral"]
    if not args.no_cap_option:
        command += ["--max-mcp-servers", str(args.servers)]
    agent = AgentProcess(command)
    try:
        agent.initialize()
        started = time.monotonic()
        opening = agent.request("session/new", {"cwd": "/tmp", "mcpServers": entries})
        failed = []

        def use_every_server() -> None:
            session_id = opening.result(timeout=120)["sessionId"]
            for entry in entries:
                agent.prompt(session_id, f"/mcp {entry['name']} echo {{\"text\": \"x\"}}").result(timeout=120)
                if agent.updates(session_id)[-2].get("status") == "failed":
                    failed.append(entry["name"])

        user = gevent.spawn(use_every_server)
        probes = []
        peak_fds = 0
        while not user.ready():
            probes.append(agent.request("session/list", {}))
            gevent.sleep(args.interval)
            if len(probes) % 20 == 0:
                peak_fds = max(peak_fds, agent.open_fds() or 0)
        user.get()
        all_answered = time.monotonic() - started
        for pending in probes:
            pending.response(timeout=120)
        late = sorted((p.answered_at - p.sent_at) * 1000 for p in probes)
        print(f"servers={args.servers} ({args.server}): session/new answered in {(opening.answered_at - opening.sent_at) * 1000:.1f} ms; "
              f"every server answered a tool call after {all_answered:.2f} s ({len(failed)} failed); peak fds {peak_fds}")
        print(f"{len(late)} session/list answers meanwhile: median {statistics.median(late):.1f} ms, "
              f"p99 {percentile(late, 99):.1f} ms, max {late[-1]:.1f} ms")
    finally:
        agent.close()


if __name__ == "__main__":
    main()
