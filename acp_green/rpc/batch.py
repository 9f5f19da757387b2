"""The answers owed for one JSON-RPC batch, held until the last is known, then sent as one array.

JSON-RPC 2.0 answers a batch with one array holding an answer for every request member and
none for notifications or responses, sent once all of them are known; an array with nothing to
hold is not sent. The order inside the array is free; here it is the order of the members.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter


@dataclass(slots=True)
class BatchAnswers:
    """What one batch line is owed: answers by member index, and what waits for the array.

    `owed` holds the request members handled and not answered yet (a background job answers
    later); `sealed` is set once every member was handled (or refused), so the array is complete
    when both say so. Owed by answer rather than by job: a request answered before its job ends
    holds nothing up.
    """

    answers: list[tuple[int, bytes]] = field(default_factory=list)
    held_bytes: int = 0  # the answers' size: held until sent, so bounded by the endpoint
    owed: set[int] = field(default_factory=set)
    sealed: bool = False
    #: Post-response steps of members (a `Reply`'s `then`): they follow their response, so they
    #: run once the array holding it is queued.
    after: list[Callable[[], None]] = field(default_factory=list)

    def owe(self, index: int) -> None:
        """Member `index` is a request: the array waits for its answer."""
        self.owed.add(index)

    def add(self, index: int, data: bytes) -> None:
        """The encoded answer (one line, newline included) of member `index`."""
        self.answers.append((index, data.rstrip(b"\n")))
        self.held_bytes += len(data)
        self.owed.discard(index)

    @property
    def complete(self) -> bool:
        return self.sealed and not self.owed

    def line(self) -> bytes | None:
        """The array of answers as one line, members' order; None when no member is answered."""
        if not self.answers:
            return None
        self.answers.sort(key=itemgetter(0))  # stable: a member's answers keep their order
        return b"[" + b",".join(data for _, data in self.answers) + b"]\n"
