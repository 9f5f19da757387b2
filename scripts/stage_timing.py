"""Serve like `acp-green serve`, timing the stages a request goes through; a report at exit.

usage: stage_timing.py REPORT serve [SERVE ARGS...]

Each stage is a function of the runtime wrapped with a clock (about 0.3 µs per call added);
the report lists calls and mean microseconds per call, so a round trip can be split into
decoding, dispatch, the handler, encoding the answer and the writer's write. Stages nest:
`handle_line` holds `wire.decode` and `Endpoint.handle`, which holds `_run_control`, and so on.
Used by `scripts/profile.sh --stages`; a benchmark peer, not part of the package.
"""

from __future__ import annotations

import atexit
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from acp_green.rpc import endpoint, transport, wire
from acp_green import settings
from acp_green.protocol import access

_totals: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])  # stage -> [nanoseconds, calls]


def _timed(owner: Any, name: str, stage: str) -> None:
    original: Callable[..., Any] = getattr(owner, name)
    clock = time.perf_counter_ns

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = clock()
        try:
            return original(*args, **kwargs)
        finally:
            total = _totals[stage]
            total[0] += clock() - started
            total[1] += 1

    setattr(owner, name, timed)


STAGES = (
    (endpoint.Endpoint, "handle_line", "Endpoint.handle_line (a whole line)"),
    (wire, "decode", "  wire.decode (UTF-8, nesting check, JSON, classify)"),
    (endpoint.Endpoint, "handle", "  Endpoint.handle (dispatch and answer)"),
    (endpoint.Endpoint, "_run_control", "    Endpoint._run_control (handler and answer)"),
    (access.SessionAccess, "named_session", "      SessionAccess.named_session"),
    (settings.SessionSettings, "set_mode", "      SessionSettings.set_mode (incl. the store write)"),
    (endpoint.Responder, "answer", "      Responder.answer (encode, queue)"),
    (transport.Outbound, "put", "        Outbound.put"),
    (transport.Outbound, "_write_all", "Outbound._write_all (the writer's write)"),
)


def _report(path: str) -> None:
    with open(path, "w") as out:
        out.write(f"{'stage':58} {'calls':>7} {'µs/call':>9}\n")
        for _owner, _name, stage in STAGES:
            nanoseconds, calls = _totals.get(stage, (0, 0))
            out.write(f"{stage:58} {calls:7d} {nanoseconds / max(calls, 1) / 1000:9.2f}\n")


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__.split("\n\n")[1])
    report = sys.argv[1]
    for owner, name, stage in STAGES:
        _timed(owner, name, stage)
    atexit.register(_report, report)
    sys.argv = ["acp-green", *sys.argv[2:]]
    from acp_green.__main__ import main as acp_green_main

    acp_green_main()


if __name__ == "__main__":
    main()
