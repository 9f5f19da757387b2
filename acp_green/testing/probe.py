"""`run_probe`: the checks of `acp-green probe -- COMMAND`, from a test."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..tools.rig import probe

__all__ = ["ProbeResult", "run_probe"]


@dataclass(frozen=True)
class ProbeResult:
    """The probe's verdict: `ok` unless a MUST row failed; `report` is the table `acp-green probe`
    prints; `failures` one entry per failed row, quoting the wire that proves it."""

    ok: bool
    report: str
    failures: list[str] = field(default_factory=list)


def run_probe(command: Sequence[str], *, timeout: float = 30.0, long_prompt: str | None = None,
              tool_prompt: str | None = None, stream_prompt: str | None = None, only: Sequence[str] = (),
              authenticate: str | None = None) -> ProbeResult:
    """Probe the agent `command` starts (each check launches it afresh), or the agent at a URL
    (`["ws://HOST:PORT/acp"]`, headers as `--header 'NAME: VALUE'` words after it; each check
    opens a connection of its own, and the rows of a process are skipped).

    `timeout` bounds each answer the probe waits for. The prompts default to the demo agent's
    commands (`/wait`, `/read {file}`, `/stream ...`); another agent passes its own, or the rows
    that need them say `not exercised`. `only`: the checks whose names contain one of these.
    `authenticate`: the authMethods id sent in `authenticate` after `initialize` (an agent with
    `auth_methods` refuses sessions until then), as `acp-green probe --authenticate ID`."""
    config = probe.ProbeConfig(command=list(command), timeout=timeout, authenticate=authenticate)
    for name, value in (("long_prompt", long_prompt), ("tool_prompt", tool_prompt), ("stream_prompt", stream_prompt)):
        if value is not None:
            setattr(config, name, value)
    report = probe.run_probe(config, only=only)
    text = probe.format_table(report)
    for violation, count in probe.distinct([*report.violations, *report.warnings])[:10]:
        text += f"\n\n{violation}" + (f"\n    (seen {count} times)" if count > 1 else "")
    failures = [f"{row.check}: {row.evidence}" + "".join(f"\n    {line}" for line in row.wire)
                for row in report.results if row.verdict == probe.FAIL]
    return ProbeResult(ok=report.ok, report=text, failures=failures)
