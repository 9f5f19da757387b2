"""Usage accounting: one record per admitted prompt, finalized on every exit path (S16)."""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any


def utf8_size(text: str) -> int:
    """How many bytes `text` takes in UTF-8; a lone surrogate (JSON input may carry one) counts
    as the three bytes "surrogatepass" gives it instead of failing."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


@dataclass(slots=True)
class UsageCounters:
    """What a turn has used so far; agents may report token counts and their context size."""

    input_bytes: int = 0  # UTF-8 bytes of the prompt's text blocks
    output_bytes: int = 0  # UTF-8 bytes of the agent's message chunks (`say`)
    input_tokens: int | None = None
    output_tokens: int | None = None
    context_used: int | None = None
    context_size: int | None = None

    def report(
        self,
        *,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        context_used: int | None = None,
        context_size: int | None = None,
    ) -> None:
        """Record token counts from a model; later reports replace earlier ones."""
        if input_tokens is not None:
            self.input_tokens = int(input_tokens)
        if output_tokens is not None:
            self.output_tokens = int(output_tokens)
        if context_used is not None:
            self.context_used = int(context_used)
        if context_size is not None:
            self.context_size = int(context_size)


RUNNING = "running"  # the stop reason of a record written at admission, until the prompt settles


@dataclass(slots=True)
class UsageRecord:
    """One prompt's usage as it reaches the store.

    Written twice under one `usage_id`: at admission with stop reason "running", then replaced
    when the prompt settles; a record still "running" after its process died is a prompt that
    was interrupted (SIGKILL, power cut) and could not finish its accounting.
    """

    session_id: str
    request_id: str
    stop_reason: str
    started_at: float
    duration: float
    input_bytes: int
    output_bytes: int
    input_tokens: int | None = None
    output_tokens: int | None = None
    recorded_at: float = field(default_factory=time.time)
    usage_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    pid: int | None = None  # the process that recorded it (filled in by the SQLite store)

    def to_dict(self) -> dict[str, Any]:
        """The record as `acp-green usage --json` prints it: camelCase keys, like ACP's."""
        return {_camel_case(name): value for name, value in asdict(self).items()}


def _camel_case(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.capitalize() for part in rest)
