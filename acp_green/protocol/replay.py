"""`session/load`'s replay: a background job that reads stored history in bounded pages and sends it.

Admission (SessionMethods.session_load, in the receive loop) checks, registers and reserves the
session and binds its current token (S2 amended, S11). The job holds that reservation while it
replays, so a prompt for the session gets session_busy (S8) and other sessions are answered as
usual. Each replayed update takes the path a turn's updates take (fairness.PacedProducer), so
back-pressure applies; the response is queued after the last replayed update (S5). A cancel
(session/cancel, $/cancel_request for the load, shutdown) ends the replay early and the load
answers as usual with what was replayed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..endpoint import Job, Outcome, Reply
from ..fairness import PacedProducer, UpdateChannel
from ..sessions import Session, SessionRegistry
from ..store import Store
from .updates import SessionUpdateEncoder

PAGE_ENTRIES = 1024
PAGE_BYTES = 256 << 10


class ReplayJob(Job):
    """One `session/load` after admission: its session reserved, its token bound."""

    def __init__(self, store: Store, sessions: SessionRegistry, session: Session, channel: UpdateChannel,
                 answer: Callable[[], Reply]) -> None:
        self.store = store
        self.sessions = sessions
        self.session = session
        self.channel = channel
        self.answer = answer
        self.token = session.token
        self.replayed = 0  # updates sent so far

    def run(self) -> Reply:
        session_id = self.session.session_id
        line = SessionUpdateEncoder(session_id).line
        out = PacedProducer(self.channel, released_by=self.token.event)
        cancelled = self.token.is_set
        after: Any = None
        while not cancelled():
            page = self.store.history_page(session_id, after, PAGE_ENTRIES, PAGE_BYTES)
            for entry in page.entries:
                if cancelled():
                    break
                out.send(line(entry.update))
                self.replayed += 1
            if page.after is None:
                break
            after = page.after
        return self.answer()

    def settle(self, outcome: Outcome) -> Outcome:
        """Release the reservation; a close or delete that waited for the replay now finishes."""
        self.session.release(self)
        self.sessions.prompt_ended(self.session)
        return outcome

    def cancel(self) -> bool:
        """End the replay early; the load still answers, with what was replayed."""
        self.session.cancel_bound(self.token)
        return True

    def shutdown(self) -> None:
        self.cancel()
