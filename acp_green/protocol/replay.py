"""`session/load`'s replay: a background job that reads stored history in bounded pages and sends it.

Admission (SessionMethods.session_load, in the receive loop) checks, registers and reserves the
session and binds its current token (S2, S11). The job holds that reservation while it
replays, so a prompt for the session gets session_busy (S8) and other sessions are answered as
usual. Each replayed update takes the path a turn's updates take (fairness.PacedProducer), so
back-pressure applies; the session-level updates (commands, title) follow the last replayed
update, and the response is queued after them (S5): nothing for the session comes after it.

ACP: the agent responds "when all the conversation entries have been streamed", so only a whole
replay answers a result. Anything that ends it early answers an error, after what was replayed:
`$/cancel_request` for the load, session/cancel and session/close of the session -32800; the
connection closing (EOF, SIGTERM) -32800 "The agent is shutting down"; session/delete of the
session unknown_session.

Only a stored entry that is one JSON object with a string `sessionUpdate` is spliced into a
line: history this runtime did not write (a damaged file, a hand edit) must never put a line
on the wire the client cannot parse. Others are skipped and counted, said once per replay.

A stored `notice` or compaction update is replayed only to a client that advertised it
(context.CAPABILITY_UPDATES): the loading client may not be the one it was sent to. For any
other client it is left out, as it was never sent live to such a client either.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..rpc import wire
from ..rpc.endpoint import Job, Outcome
from ..errors import RequestCancelled, RpcError, UnknownSession
from ..rpc.fairness import PacedProducer, UpdateChannel
from ..sessions import Session, SessionRegistry
from ..settings import booleans_as_selects
from .dialect import V1, Shapes
from .updates import SessionUpdateEncoder

if TYPE_CHECKING:
    from ..store.base import Store

PAGE_ENTRIES = 1024
PAGE_BYTES = 256 << 10

log = logging.getLogger(__name__)


def update_kind(update_json: bytes) -> str | None:
    """The `sessionUpdate` of stored bytes that are one JSON object with a string one; else None (see above)."""
    try:
        update = wire.loads(update_json)
    except ValueError:
        return None
    kind = update.get("sessionUpdate") if type(update) is dict else None
    return kind if type(kind) is str else None



class ReplayJob(Job):
    """One `session/load` after admission: its session reserved, its token bound."""

    def __init__(self, store: Store, sessions: SessionRegistry, session: Session, channel: UpdateChannel,
                 closing: Callable[[], list[bytes]], answer: Callable[[], Any],
                 accepts: Callable[[str], bool] = lambda kind: True, replay: bool = True, shows_booleans: bool = True,
                 shapes: Shapes = V1) -> None:
        self.store = store
        self.sessions = sessions
        self.session = session
        self.channel = channel
        self.closing = closing  # the session-level update lines sent after the replay, before the answer
        self.answer = answer  # the load's result
        self.accepts = accepts  # whether the loading client may be sent an update of a kind
        self.replay = replay  # False: ACP v2's resume without `replayFrom` (the closing lines only)
        self.shows_booleans = shows_booleans  # else a stored boolean option is replayed as its select
        self.shapes = shapes  # the negotiated version's: history is stored in v1's shape
        self.token = session.token
        self.replayed = 0  # updates sent so far
        self.ended_by: RpcError | None = None  # why the replay was cut short, when the job was told

    def run(self) -> Any:
        session_id = self.session.session_id
        line = SessionUpdateEncoder(session_id).line
        stored = self.shapes.stored
        out = PacedProducer(self.channel, released_by=self.token.event)
        cancelled = self.token.is_set
        after: Any = None
        skipped = 0
        whole = not self.replay
        while self.replay and not cancelled():
            page = self.store.history_page(session_id, after, PAGE_ENTRIES, PAGE_BYTES)
            for entry in page.entries:
                if cancelled():
                    break
                kind = update_kind(entry.update)
                if kind is None:
                    skipped += 1
                    continue
                if not self.accepts(kind):
                    continue
                update_json = entry.update
                if kind == "config_option_update" and not self.shows_booleans:
                    update_json = booleans_as_selects(update_json)
                shaped = stored(kind, update_json)
                if shaped is not None:  # None: the negotiated version has no such update
                    out.send(line(shaped))
                self.replayed += 1
            else:
                if page.after is None:
                    whole = True
                    break
                after = page.after
                continue
            break
        if skipped:
            log.warning("replay of session %s skipped %d stored entries that are not session updates", ascii(session_id), skipped)
        if not whole:
            raise self.cut_short()
        if not self.session.deleted:  # nothing more for a session deleted once its replay was whole
            for closing_line in self.closing():  # not history: a cancel now still answers the whole replay
                out.send(closing_line)
        return self.answer()

    def cut_short(self) -> RpcError:
        """The error a replay ended early answers (see above)."""
        log.info("replay of session %s ended after %d updates, before its end", ascii(self.session.session_id), self.replayed)
        if self.ended_by is not None:
            return self.ended_by
        if self.session.deleted:
            return UnknownSession(self.session.session_id)
        return RequestCancelled(f"The replay was cancelled after {self.replayed} updates (session/cancel or session/close)")

    def settle(self, outcome: Outcome) -> Outcome:
        """Release the reservation; a close or delete that waited for the replay now finishes."""
        self.session.release(self)
        self.sessions.prompt_ended(self.session)
        return outcome

    def cancel(self) -> bool:
        """$/cancel_request: end the replay early; the load answers -32800 after what was replayed."""
        if self.ended_by is None:
            self.ended_by = RequestCancelled()
        self.session.cancel_bound(self.token)
        return True

    def shutdown(self) -> None:
        if self.ended_by is None:
            self.ended_by = RequestCancelled("The agent is shutting down")
        self.session.cancel_bound(self.token)
