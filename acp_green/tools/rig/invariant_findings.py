"""What the rig's invariant checks find: each broken invariant a `Violation` quoting the messages
that broke it, kept by the `Findings` of one run with how often each invariant was exercised."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .client import Record

__all__ = ["Findings", "Violation", "as_object", "render"]


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken invariant and the messages that broke it."""

    invariant: str
    detail: str
    messages: tuple[str, ...] = ()

    def __str__(self) -> str:
        quoted = "".join(f"\n    {m}" for m in self.messages)
        return f"{self.invariant}: {self.detail}{quoted}"

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form for summaries."""
        return {"invariant": self.invariant, "detail": self.detail, "messages": list(self.messages)}


def render(record: Record, limit: int = 300) -> str:
    """One record as a short line: time, direction and the message (or raw bytes)."""
    arrow = "agent->client" if record.direction == "in" else "client->agent"
    if record.message is not None:
        text = json.dumps(record.message, separators=(",", ":"), default=repr)
    else:
        text = repr(record.raw)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"[{record.t:.3f} {arrow}] {text}"


class Findings:
    """What a run found: violations (failures) and advisories (warnings), each list bounded, and
    how often each invariant had something to check."""

    def __init__(self, max_violations: int) -> None:
        self.violations: list[Violation] = []
        self.advisories: list[Violation] = []  # broken ADVISORIES: warnings, never failures
        # How often each invariant (or advisory) had something to check: a row with nothing to
        # check says so instead of claiming the invariant held.
        self.exercised: Counter[str] = Counter()
        self.max_violations = max_violations

    @property
    def ok(self) -> bool:
        return not self.violations

    def add(self, invariant: str, detail: str, records: Sequence[Record | None] = ()) -> None:
        """A broken invariant, quoting the records that broke it (none for what is outside the
        message stream: the exit, orphans)."""
        if len(self.violations) < self.max_violations:
            self.violations.append(Violation(invariant, detail, tuple(render(r) for r in records if r is not None)))

    def advise(self, advisory: str, detail: str, records: Sequence[Record | None] = ()) -> None:
        """A broken advisory, quoting the records that broke it."""
        if len(self.advisories) < self.max_violations:
            self.advisories.append(Violation(advisory, detail, tuple(render(r) for r in records if r is not None)))


def as_object(value: Any) -> dict[str, Any]:
    """`value` when it is a JSON object, else an empty one: what an agent sent may be any shape."""
    return value if isinstance(value, dict) else {}
