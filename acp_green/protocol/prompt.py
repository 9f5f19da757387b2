"""`session/prompt`: admission in the receive loop, the turn's job, and the record each turn leaves.

Admission reserves the session, binds its current token before the job's greenlet first runs
(S8, S11) and begins the turn's record (turn_record.py), which hands the turn's history to the
store while it runs. Settling releases the reservation, releases the turn's terminals, fails
every tool call the turn left open, sends the final usage, then ends the record with the turn's
outcome and hands exactly one usage record to the store (S14, S16).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import gevent

from ..rpc import wire
from ..agent import Agent, Turn, stop_reason_problem
from ..rpc.endpoint import Job, Outcome, Reply, background
from ..errors import InternalError, SessionBusy, one_line
from ..rpc.params import Params
from ..sessions import Session, SessionRegistry
from ..settings import SessionSettings
from ..store.turns import FAILED, TurnOutcome
from ..rpc.transport import Outbound
from ..usage import RUNNING, UsageRecord
from . import dialect_v2
from .access import SessionAccess
from .dialect import OutgoingDialect, Shapes
from .interrupt import DEFAULT_CANCEL_GRACE, CancelInterrupt
from .session_mcp import SessionMcpServers
from .turn_record import TurnRecord
from .updates import SessionUpdateEncoder, session_info, title_from_prompt

if TYPE_CHECKING:
    from ..conversation import Conversation
    from ..store.base import Store

log = logging.getLogger(__name__)

#: What a tool call left open says when the turn ended this way (other ends: see _close_tool_calls).
CLOSING_REASONS = {"cancelled": "Cancelled", "aborted": "Aborted: the agent was stopped before this tool call finished"}


def accepted_kinds(agent: Agent) -> frozenset[str]:
    """The block kinds beyond text and resource_link that `agent` declared it reads."""
    declared = {"image": agent.accepts_images, "audio": agent.accepts_audio, "resource": agent.accepts_embedded_context}
    return frozenset(kind for kind, accepted in declared.items() if accepted)


#: Content blocks one prompt may hold. Admission runs in the receive loop, so its work must stay
#: small whatever the client sends: 10,000 blocks are checked in a few milliseconds.
MAX_PROMPT_BLOCKS = 10_000
# How long a prompt's answer waits for its turn to be committed (PromptLedger.wait_stored): a
# commit takes well under a millisecond; a slower disk or server still answers within this.
STORED_WAIT = 1.0


def prompt_blocks(params: Params, accepted: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """The prompt's content blocks, with the fields the runtime reads checked.

    More than MAX_PROMPT_BLOCKS blocks are refused before any is looked at. An image, audio or
    resource block is refused unless its kind is in `accepted` (the agent's `promptCapabilities`):
    a client must not send one, and the agent could not read it.
    """
    from ..blocks import DECLARED_KINDS, block_problem  # the block types: loaded with the first prompt

    prompt = params.required("prompt", list)
    if len(prompt) > MAX_PROMPT_BLOCKS:
        raise params.refuse("prompt", f"field 'prompt' holds {len(prompt)} content blocks; at most {MAX_PROMPT_BLOCKS} are accepted")
    for index, block in enumerate(prompt):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise params.refuse("prompt", f"prompt[{index}] must be an object with a 'type'")
        kind = block["type"]
        if kind in DECLARED_KINDS and kind not in accepted:
            raise params.refuse("prompt", f"prompt[{index}] has type {kind!r}, which this agent does not accept "
                                f"(promptCapabilities.{DECLARED_KINDS[kind]} is false)")
        problem = block_problem(block)
        if problem is not None:
            raise params.refuse("prompt", f"prompt[{index}]{problem}")
    return prompt


class PromptJob(Job):
    """One `session/prompt`: admitted with its session reserved and its token bound."""

    def __init__(self, agent: Agent, ledger: "PromptLedger", session: Session, request_id: wire.RequestId, turn: Turn,
                 record: TurnRecord, outbound: Outbound, v2: bool = False, cancel_grace: float = DEFAULT_CANCEL_GRACE) -> None:
        self.agent = agent
        self.cancel_grace = cancel_grace  # then a cancelled turn is interrupted at its blocking call
        self.v2 = v2  # answered at admission with the user message's id; its end is an idle state_update
        self.outbound = outbound
        self.ledger = ledger
        self.session = session
        self.request_id = request_id
        self.turn = turn
        self.record = record
        self.token = turn.token
        self.started = time.time()
        self.started_mono = time.monotonic()
        self.usage_id = uuid.uuid4().hex

    def run(self) -> Any:
        turn = self.turn
        if turn.cancelled:  # cancelled between admission and our first switch (S11)
            return {"stopReason": "cancelled"}
        # A turn keeps its history in the store as it streams: one that starts while the store
        # is still opening (just after start-up) waits for it here, never in the receive loop.
        # A cancel ends the wait; the agent still runs and sees its token set, as it would have.
        self.ledger.store.wait_for_history_room(self.token)
        interrupt = CancelInterrupt(self.token, self.cancel_grace, f"the turn of {self.session.session_id}")
        try:
            stop_reason = self.agent.prompt(turn) or "end_turn"
        finally:
            interrupt.disarm()  # before settling: the runtime's own waits are never interrupted
        problem = stop_reason_problem(self.agent, stop_reason)
        if problem is not None:  # the agent author's mistake: said in their log, and in the answer
            log.error("%s", problem)
            raise InternalError(problem)
        return {"stopReason": stop_reason}

    def settle(self, outcome: Outcome) -> Outcome:
        """Finalize usage and history, pick the answer, then release the reservation (S14, S16).

        The reservation is released last, after the wait for the store's commit and with no
        yield before the answer is queued: a prompt sent meanwhile is refused busy (S8), so no
        update of a next turn can reach the client before this turn's answer (or v2 idle)."""
        try:
            return self._settled(outcome)
        finally:
            self.session.release(self)
            self.ledger.sessions.prompt_ended(self.session)

    def _settled(self, outcome: Outcome) -> Outcome:
        turn = self.turn
        error = None
        if self.token.is_set():
            # Once cancelled, the answer is `cancelled` whatever happened after (S14).
            stop = "aborted" if outcome.killed else "cancelled"
            final = Outcome(result={"stopReason": "cancelled"})
        elif outcome.error is not None:
            stop, final, error = FAILED, outcome, outcome.error.message
        elif outcome.killed or outcome.cancelled:
            stop, final = ("aborted" if outcome.killed else "cancelled"), Outcome(result={"stopReason": "cancelled"})
        else:
            stop, final = outcome.result["stopReason"], outcome
        self._before_response(stop, error)
        usage = turn.usage
        try:
            if usage.context_size is not None and not turn.closed:
                used = usage.context_used if usage.context_used is not None else (usage.input_tokens or 0) + (usage.output_tokens or 0)
                turn.send_final({"sessionUpdate": "usage_update", "used": used, "size": usage.context_size})
        except Exception:  # counters the agent set that JSON cannot carry: the record still counts (S16)
            log.exception("the final usage_update of a turn of %s could not be sent", self.session.session_id)
        self.ledger.finished(self, TurnOutcome(stop, error))
        self.ledger.wait_stored()
        return final

    def _before_response(self, stop: str, error: str | None) -> None:
        """The one place for what must reach the client before the prompt's response (S5),
        whatever ended the turn: its terminals released, then its open tool calls failed.
        Runs on every settle path (perhaps on the hub): nothing here blocks or raises."""
        try:
            self.turn.close_resources()
        except Exception:  # the response and the usage record still go out (S14, S16)
            log.exception("releasing the resources of a turn of %s failed", self.session.session_id)
        self._close_tool_calls(stop, error)

    def _close_tool_calls(self, stop: str, error: str | None) -> None:
        """Fail every tool call the turn left open, before the response (S5): each one started
        gets a final status whatever ended the turn; queued without yielding."""
        record = self.record
        if record.ended or not record.open_tool_calls:
            return
        reason = CLOSING_REASONS.get(stop) or one_line(f"The turn failed: {error}" if error else "The turn ended before this tool call finished")
        try:
            for line in record.close_tool_calls(reason):
                self.outbound.put(line)
        except Exception:  # the response and the usage record still go out (S14, S16)
            log.exception("closing the open tool calls of a turn of %s failed", self.session.session_id)

    # -- ACP v2: the acknowledgement, and the state updates around the turn ---------------------
    def acknowledge(self) -> Reply | None:
        """v2: the prompt is inserted once admitted: answered now with its user message's id,
        then `running` and the echo of the message with that id."""
        if not self.v2:
            return None
        return Reply({"messageId": self.record.user_message_id}, then=self._started)

    def _started(self) -> None:
        session_id = self.session.session_id
        self.outbound.put(dialect_v2.encode(session_id, dialect_v2.state_update("running")))
        self.outbound.put(dialect_v2.encode(session_id, dialect_v2.user_message(self.record.user_message_id, self.turn.prompt)))

    def report(self, outcome: Outcome) -> None:
        """v2: the turn's end, as settled (after its updates and its final usage): idle with its stop reason."""
        if outcome.error is not None:
            update = dialect_v2.state_update("idle", "error", outcome.error.to_wire())
        elif isinstance(outcome.result, dict) and isinstance(outcome.result.get("stopReason"), str):
            update = dialect_v2.state_update("idle", outcome.result["stopReason"])
        else:
            update = dialect_v2.state_update("idle", "cancelled")
        self.outbound.put(dialect_v2.encode(self.session.session_id, update))

    def cancel(self) -> bool:
        """Cancel this prompt; if its token is the session's current one, install a fresh one (S12)."""
        self.session.cancel_bound(self.token)
        return True

    def shutdown(self) -> None:
        self.cancel()


class PromptLedger(Mapping[str, PromptJob]):
    """The running prompt of each session, and the history and one usage record each leaves (S16)."""

    def __init__(self, store: Store, sessions: SessionRegistry) -> None:
        self.store = store
        self.sessions = sessions
        self._running: dict[str, PromptJob] = {}

    def __getitem__(self, session_id: str) -> PromptJob:
        return self._running[session_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._running)

    def __len__(self) -> int:
        return len(self._running)

    def admitted(self, job: PromptJob) -> None:
        """Known from now on: settling replaces this record. Only a process that dies without
        settling leaves it "running" (shown as interrupted), and its turn without an outcome."""
        self._running[job.session.session_id] = job
        job.record.begin(job.turn.prompt)
        self.store.record_usage(usage_record(job, RUNNING))

    def finished(self, job: PromptJob, outcome: TurnOutcome) -> None:
        """End the turn's history with its outcome and hand exactly one usage record for the
        prompt to the store (S16); never blocks.

        Nothing that goes wrong with the history (a store failure) may skip the usage record or
        leave the session marked as prompting. (Releasing the session is the job's settle's.)
        """
        session = job.session
        session_id = session.session_id
        try:
            if self._running.get(session_id) is job:
                del self._running[session_id]
            job.record.end(outcome)
            if not session.deleted:
                self.sessions.save(session)  # its updated time, for session/list
                self.sessions.store_state(session)  # the agent's session.state, as the turn left it
        except Exception:
            log.exception("storing the history of a turn of %s failed", session_id)
        try:
            self.store.record_usage(usage_record(job, outcome.stop_reason))
        except Exception:
            log.exception("recording usage for %s failed", session_id)


    def wait_stored(self) -> None:
        """Hold a prompt's answer until its turn's end, history and usage are committed, so a
        client that has the answer finds all of it in the store, from any process sharing it,
        even if this one is killed right after. At most STORED_WAIT; never on the hub (a kill's
        settle), and not while the store's writes wait for a failing disk (it says so itself)."""
        if gevent.getcurrent() is gevent.get_hub():
            return
        try:
            with gevent.Timeout(STORED_WAIT, False):
                self.store.wait_committed()
        except Exception as exc:  # the answer goes out whatever the store says; the store logs its own failures
            log.debug("waiting for a turn's end to be stored: %s", exc)


def usage_record(job: PromptJob, stop_reason: str) -> UsageRecord:
    """The usage ledger's row for a prompt, as it stands now."""
    usage = job.turn.usage
    return UsageRecord(
        session_id=job.session.session_id,
        request_id=repr(job.request_id),
        stop_reason=stop_reason,
        started_at=job.started,
        duration=time.monotonic() - job.started_mono,
        input_bytes=usage.input_bytes,
        output_bytes=usage.output_bytes,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        usage_id=job.usage_id,
    )


#: What a turn asks the user through the client: under v2 its foreground work waits meanwhile.
ASKS_THE_USER = frozenset({"session/request_permission", "elicitation/create"})


def waiting_on_user(call: Callable[..., Any], outbound: Outbound, session_id: str, shapes: Shapes, method: str, params: Any,
                    *args: Any, **kwargs: Any) -> Any:
    """A v2 turn's request to the client, built in v2's shape: while it asks the user, the session
    `requires_action`; `running` again once answered (or failed: the turn goes on, or winds down
    to its idle). A request the shapes cannot build is refused before anything is sent."""
    if method not in ASKS_THE_USER:
        return call(method, params, *args, **kwargs)
    params = shapes.request(method, params)
    outbound.put(dialect_v2.encode(session_id, dialect_v2.state_update("requires_action")))
    try:
        return call(method, params, *args, **kwargs)
    finally:
        outbound.put(dialect_v2.encode(session_id, dialect_v2.state_update("running")))


class PromptService:
    """Admits `session/prompt` requests and builds the turn each one runs."""

    def __init__(self, agent: Agent, access: SessionAccess, ledger: PromptLedger, session_mcp: SessionMcpServers,
                 outbound: Outbound, call_client: Callable[..., Any], settings: SessionSettings,
                 send_client: Callable[[str, Any], None] | None = None, dialect: OutgoingDialect | None = None,
                 cancel_grace: float = DEFAULT_CANCEL_GRACE) -> None:
        self.agent = agent
        self.cancel_grace = cancel_grace
        self.dialect = dialect if dialect is not None else OutgoingDialect()  # the connection's: what it sends
        self.settings = settings
        self.accepted = accepted_kinds(agent)
        self.access = access
        self.ledger = ledger
        self.session_mcp = session_mcp
        self.outbound = outbound
        self.call_client = call_client
        self.send_client = send_client

    def _history(self, session_id: str, running_turn: str, newest_first: bool, since_turn: int | None) -> Conversation:
        """A turn's view of its session's stored turns, itself left out."""
        from ..conversation import Conversation  # with the typed blocks it builds: not before initialize

        return Conversation(self.ledger.store, session_id, newest_first=newest_first, since_turn=since_turn, skip_turn_id=running_turn)

    @background("session/prompt")
    def admit_prompt(self, params: Any, request_id: wire.RequestId) -> PromptJob:
        """In the receive loop: validate, reserve the session, bind its current token (S8, S11)."""
        checked = Params(params, "session/prompt")
        session_id = checked.identifier("sessionId")
        prompt = prompt_blocks(checked, self.accepted)
        session = self.access.named_session(checked)
        if session.busy:  # under v2 a turn's end is its idle state_update, not a response
            raise SessionBusy(session_id) if self.access.context.snapshot.v1 else SessionBusy(session_id, "its idle state_update")
        token = session.token
        self.session_mcp.start_declared(session)  # after an eviction, the servers start again
        shapes = self.dialect.shapes  # the turn's for its whole life (S3)
        record = TurnRecord(self.ledger.store, session, SessionUpdateEncoder(session_id), token=token, shapes=shapes)
        snapshot = self.access.context.snapshot
        turn = Turn(
            session=session,
            prompt=prompt,
            token=token,
            snapshot=snapshot,
            channel=self.outbound,
            updates=record,
            call_client=self.call_client if snapshot.v1 else partial(waiting_on_user, self.call_client, self.outbound, session_id, shapes),
            mcp=partial(self.session_mcp.client_session, session),
            send_client=self.send_client,
            settings=self.settings,
            history=partial(self._history, session_id, record.turn_id),
            save_state=self.access.sessions.save_state,
        )
        job = PromptJob(self.agent, self.ledger, session, request_id, turn, record, self.outbound, v2=not snapshot.v1,
                        cancel_grace=self.cancel_grace)
        title = title_from_prompt(turn.text) if session.record.title is None else None
        # Nothing below can fail: a reservation is only taken once admission is certain (S14).
        session.reserve(job)
        self.ledger.admitted(job)
        if title:
            session.record.title = title
            self.access.sessions.save(session)
            # Before the prompt's own updates and its response (S5).
            line = shapes.line(session_id, session_info(session))
            if line is not None:
                self.outbound.put(line)
        return job
