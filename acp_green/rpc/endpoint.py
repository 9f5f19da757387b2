"""The JSON-RPC endpoint: classify, admit, run, and answer every request exactly once.

Features register their handlers (`add_feature`, with `@control`, `@background`,
`@notification` and `@fallback` marking them). Control requests run inline in the receive
loop, in receive order (S2). Background requests are admitted in the loop — slot, then
route-specific admission (session reservation, token binding) — and run in their own greenlet
(S1). Whatever a handler, an admission, a job or a settle raises becomes an `Outcome` through
one mapping, `outcome_of`. A control request is answered where it ran; a background request is
answered by `_finish`, which is idempotent and also wired to `rawlink`, because a greenlet
killed before its first switch never runs its body or its `finally` (docs/ARCHITECTURE.md, the gevent traps).
A job may be answered at admission instead (`Job.acknowledge`); `_finish` then hands its settled
outcome to `Job.report`, the one message that stands for its end.
Once `accept_batches` is set, a JSON-RPC batch line is handled member by member as if each came
alone, and the answers its requests are owed leave as one array (`batch.BatchAnswers`).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import gevent
from gevent.greenlet import Greenlet
from gevent import GreenletExit

from . import wire
from .batch import BatchAnswers
from ..errors import BatchTooLarge, ConnectionBusy, InternalError, InvalidParams, InvalidRequest, MethodNotFound, OutOfMemory, OutputBacklog, ParseError, RequestCancelled, RpcError, TurnCancelled, TurnInterrupted, error_for, one_line
from .client_requests import ClientRequests
from .transport import Outbound, request_id_of

log = logging.getLogger(__name__)


class Kind(enum.Enum):
    CONTROL = "control"
    BACKGROUND = "background"


@dataclass(frozen=True, slots=True)
class Reply:
    """A result plus work to queue right after the response (e.g. first updates); control or background."""

    result: Any
    then: Callable[[], None] | None = None


@dataclass(slots=True)
class Outcome:
    """How a background request ended, before it is turned into a response."""

    result: Any = None
    error: RpcError | None = None
    cancelled: bool = False  # a TurnCancelled escaped the handler
    killed: bool = False  # GreenletExit: killed at shutdown or by $/cancel_request


KILLED = Outcome(killed=True)

#: What a handler, an admission, a job or a settle may raise that `outcome_of` maps. Anything
#: else (KeyboardInterrupt) is not the request's to answer and passes through.
MAPPED_EXCEPTIONS: tuple[type[BaseException], ...] = (Exception, gevent.Timeout, SystemExit, GreenletExit, TurnInterrupted)


def outcome_of(exc: BaseException, doing: str) -> Outcome:
    """How a request ended, from what was raised; `doing` names it in the log.

    A kill (GreenletExit) is `killed`, a TurnCancelled or TurnInterrupted `cancelled`: the caller decides
    whether it goes on (a killed greenlet or reader does) and how a cancel is answered.
    Everything else is answered with `errors.error_for`, the one mapping for every request path.
    """
    if isinstance(exc, GreenletExit):
        return KILLED
    if isinstance(exc, (TurnCancelled, TurnInterrupted)):
        return Outcome(cancelled=True)
    return Outcome(error=error_for(exc, doing))


class Job:
    """A background request after admission; subclasses hold what admission reserved."""

    def run(self) -> Any:
        raise NotImplementedError

    def settle(self, outcome: Outcome) -> Outcome:
        """Release what admission took and map the outcome; runs once, maybe in the hub, never blocks."""
        return outcome

    def cancel(self) -> bool:
        """$/cancel_request: True when the job cancels cooperatively and answers by itself."""
        return False

    def shutdown(self) -> None:
        """Ask the job to finish early because the connection is closing."""

    def acknowledge(self) -> Reply | None:
        """The response to send at admission (an acknowledgement), or None: answered when it ends.

        A job answered at admission still holds its slot until it ends, and its id is no longer
        in flight; its end is then not a response: `report` gets the settled outcome instead."""
        return None

    def report(self, outcome: Outcome) -> None:
        """The one message that stands for the end of a job answered at admission; never blocks."""


class Dialect(Protocol):
    """How a negotiated protocol version reshapes what a handler reads and answers."""

    def params(self, method: str, params: Any) -> Any:
        """A request's params as the handlers read them."""

    def result(self, method: str, result: Any) -> Any:
        """A handler's result as this version's client reads it."""


@dataclass(frozen=True, slots=True)
class Route:
    """One entry of the method table, and which protocol versions it serves.

    `versions`: the negotiated versions it serves (None: every one); `unstable`: part of a
    protocol's unstable schema (not served to a connection that asked for the stable one only);
    `otherwise`: the route of the same method for what this one does not serve (ACP v2's
    `session/resume` after v1's). `serving` picks; the protocol installs what it picked."""

    kind: Kind
    handler: Callable[[Any, wire.RequestId], Any]  # control: -> result | Reply; background: -> Job
    frees_resources: bool = False  # background only: never refused for lack of a slot (see `background`)
    versions: frozenset[int] | None = None
    unstable: bool = False
    otherwise: Route | None = None

    def serves(self, version: int, stable_only: bool = False) -> bool:
        """Whether this route answers on a connection that negotiated `version`."""
        return (self.versions is None or version in self.versions) and not (stable_only and self.unstable)

    def serving(self, version: int, stable_only: bool = False) -> Route | None:
        """This route or the first of its `otherwise` that serves `version`; None: -32601 there."""
        route: Route | None = self
        while route is not None and not route.serves(version, stable_only):
            route = route.otherwise
        return route


@dataclass(frozen=True, slots=True)
class _Mark:
    """What a feature's method handles, as `Endpoint.add_feature` reads it."""

    role: Kind | str  # a Kind for a request, "notification", or "fallback"
    method: str | None
    frees_resources: bool = False
    versions: frozenset[int] | None = None
    unstable: bool = False


_MARK = "__endpoint_mark__"
_Handler = TypeVar("_Handler", bound=Callable[..., Any])


def _marker(role: Kind | str, method: str | None, frees_resources: bool = False, versions: frozenset[int] | None = None,
            unstable: bool = False) -> Callable[[_Handler], _Handler]:
    def mark(handler: _Handler) -> _Handler:
        setattr(handler, _MARK, _Mark(role, method, frees_resources, versions, unstable))
        return handler

    return mark


def control(method: str, *, versions: frozenset[int] | None = None, unstable: bool = False) -> Callable[[_Handler], _Handler]:
    """Mark `(params, request_id) -> result | Reply` as the control handler of `method` (S2);
    `versions` and `unstable` as `Route` reads them."""
    return _marker(Kind.CONTROL, method, False, versions, unstable)


def background(method: str, *, frees_resources: bool = False, versions: frozenset[int] | None = None,
               unstable: bool = False) -> Callable[[_Handler], _Handler]:
    """Mark `(params, request_id) -> Job` as the admission of background `method` (S1).

    `frees_resources`: the request releases what other requests hold (`mcp/disconnect`), so it
    is admitted even when every `max_background` slot is taken: refusing it would keep them taken.
    """
    return _marker(Kind.BACKGROUND, method, frees_resources, versions, unstable)


def notification(method: str) -> Callable[[_Handler], _Handler]:
    """Mark `(params) -> None` as the handler of notification `method` (never answered, S6)."""
    return _marker("notification", method)


def fallback(lookup: _Handler) -> _Handler:
    """Mark `(method) -> Route | None`: the route of a method the table does not name."""
    return _marker("fallback", None)(lookup)


#: Where an answer goes: a batch's answers and the index of the member it answers.
_Slot = tuple[BatchAnswers, int]


class _Task:
    __slots__ = ("request_id", "method", "job", "greenlet", "done", "key", "acknowledged", "batch")

    def __init__(self, request_id: wire.RequestId, method: str, job: Job, batch: _Slot | None = None) -> None:
        self.request_id = request_id
        self.method = method
        self.job = job
        self.greenlet: Greenlet | None = None
        self.done = False  # settled and answered, or being so: _finish runs once
        self.key: Hashable = wire.id_key(request_id)  # in the in-flight table
        self.acknowledged = False  # answered at admission: its end is reported, not answered
        self.batch = batch  # a batch member's place in its batch's answer

class MethodTable:
    """Which handler each request and notification goes to; features add theirs with `add_feature`."""

    def __init__(
        self,
        routes: Mapping[str, Route] | None,
        fallback: Callable[[str], Route | None] | None,
        notifications: Mapping[str, Callable[[Any], None]] | None,
    ) -> None:
        self.routes: dict[str, Route] = dict(routes or {})
        self.fallback = fallback
        self.notifications: dict[str, Callable[[Any], None]] = dict(notifications or {})

    def route_of(self, method: str) -> Route | None:
        """The route of a request's method: the table's own, else the fallback's, else None."""
        route = self.routes.get(method)
        if route is None and self.fallback is not None:
            route = self.fallback(method)
        return route

    def add_feature(self, feature: object) -> None:
        """Register every method of `feature` marked @control, @background, @notification or @fallback.

        A method named twice is a wiring mistake and raises ValueError: one handler per method.
        """
        seen: set[str] = set()
        for klass in type(feature).__mro__:
            for name, value in vars(klass).items():
                mark = getattr(value, _MARK, None)
                if mark is None or name in seen:
                    continue  # an override in a subclass wins
                seen.add(name)
                self._register(mark, getattr(feature, name))

    def _register(self, mark: _Mark, handler: Callable[..., Any]) -> None:
        if mark.role == "fallback":
            if self.fallback is not None:
                raise ValueError("two fallback routes")
            self.fallback = handler
            return
        assert mark.method is not None
        table: dict[str, Any] = self.notifications if mark.role == "notification" else self.routes
        if mark.method in table:
            raise ValueError(f"{mark.method} has two handlers")
        if mark.role == "notification":
            table[mark.method] = handler
        else:
            assert isinstance(mark.role, Kind)
            table[mark.method] = Route(mark.role, handler, mark.frees_resources, mark.versions, mark.unstable)


class Responder:
    """Turns how a request ended into its one response on the outbound queue.

    Notes when the request of the line being handled is answered, so that the last-resort guard
    (`Refusals.last_resort`) never answers it a second time. An answer to a batch member goes
    into its batch's answer (`into`), which is queued as one line once it is complete.
    """

    def __init__(self, outbound: Outbound) -> None:
        self.outbound = outbound
        #: The negotiated protocol's reshaping of params and results; None: handlers' own shapes.
        self.dialect: Dialect | None = None
        #: The request of the line (or batch member) being handled, by id key; its handler sets it.
        self.line_key: wire.IdKey | None = None
        #: Whether the request `line_key` names has been answered; its handler clears it.
        self.line_answered = False
        #: Where answers go now: the batch member being handled (or answered), else None (a line).
        self.into: _Slot | None = None

    def answer(self, request_id: wire.RequestId, outcome: Outcome) -> None:
        """The one response an outcome stands for; a `Reply`'s post-response step runs right after it."""
        if outcome.error is not None:
            self.send_error(request_id, outcome.error)
        elif outcome.killed or outcome.cancelled:
            self.send_error(request_id, RequestCancelled())
        elif isinstance(outcome.result, Reply):
            then = outcome.result.then
            if then is not None and self.into is not None:
                self.into[0].after.append(then)  # after the array that holds the response
                then = None
            self._send_result(request_id, outcome.result.result)
            if then is not None:
                _run_step(then, request_id)
        else:
            self._send_result(request_id, outcome.result)

    def translate(self, method: str, result: Any) -> Any:
        """A handler's result (or a Reply's) as the negotiated dialect answers it."""
        dialect = self.dialect
        if dialect is None:
            return result
        if isinstance(result, Reply):
            return Reply(dialect.result(method, result.result), result.then)
        return dialect.result(method, result)

    def params_of(self, request: wire.Request) -> Any:
        """A request's params as its handler reads them under the negotiated dialect."""
        return request.params if self.dialect is None else self.dialect.params(request.method, request.params)

    def answer_inline(self, request_id: wire.RequestId, outcome: Outcome) -> None:
        """Answer a request handled in the receive loop: only shutdown kills the reader."""
        if outcome.killed:
            outcome = Outcome(error=RequestCancelled("The agent is shutting down"))
        self.answer(request_id, outcome)

    def _mark_answered(self, request_id: wire.RequestId) -> None:
        """Note an answer to the current line's request (ids in flight are unique, S4)."""
        if self.line_key is not None and wire.id_key(request_id) == self.line_key:
            self.line_answered = True

    def _send_result(self, request_id: wire.RequestId, result: Any) -> None:
        self._mark_answered(request_id)
        try:
            data = wire.encode_result(request_id, result)
        except (TypeError, ValueError, OverflowError) as exc:
            log.error("result for %s cannot be encoded: %s", wire.id_text(request_id), exc)
            data = wire.encode_error(request_id, InternalError(one_line(f"Result not encodable: {exc}")).to_wire())
        self._emit(data)

    def send_error(self, request_id: wire.RequestId, error: RpcError) -> None:
        """Answer `request_id` (None: id null) with `error`."""
        self._mark_answered(request_id)
        try:
            data = wire.encode_error(request_id, error.to_wire())
        except (TypeError, ValueError, OverflowError):
            data = wire.encode_error(request_id, {"code": error.code, "message": one_line(repr(error.message))})
        self._emit(data)

    def _emit(self, data: bytes) -> None:
        if self.into is None:
            self.outbound.put(data)
        else:
            self.into[0].add(self.into[1], data)
            self.send_if_complete(self.into[0])

    def send_if_complete(self, batch: BatchAnswers) -> None:
        """Queue a batch's answer as one line once every member is answered, then what waited for it."""
        if not batch.complete:  # each owed member is answered once: complete at most once after sealing
            return
        line = batch.line()
        if line is not None:  # a batch of notifications and responses is not answered
            self.outbound.put(line)
        for step in batch.after:
            _run_step(step, None)


class BackgroundJobs:
    """The in-flight table of background requests: admission to a slot, a greenlet each, exactly
    one settle-and-answer (`_finish`), `$/cancel_request`, and the drain at shutdown."""

    def __init__(self, responder: Responder, outbound: Outbound, max_background: int) -> None:
        self._responder = responder
        self._outbound = outbound  # its backlog refuses admission
        self.max_background = max_background
        self._tasks: dict[Hashable, _Task] = {}
        self._dying: set[Greenlet] = set()  # answered and killed, not yet dead (agent code may linger)
        #: Greenlets in their own job's settle, out of the table but not answered yet (a prompt's
        #: answer waits for its commit): the drain waits for them and never kills them.
        self._settling: set[Greenlet] = set()
        #: False once the connection closes: a background request is then refused -32800.
        self.admitting = True

    def in_flight(self, request_id: wire.RequestId) -> bool:
        """Whether a request of this id is in flight and not answered yet (S4)."""
        return wire.id_key(request_id) in self._tasks

    def admit(self, request: wire.Request, route: Route) -> None:
        """Admission happens here, in the receive loop, without yielding (S9, S11)."""
        responder = self._responder
        if not self.admitting:
            responder.send_error(request.id, RequestCancelled("The agent is shutting down"))
            return
        if self._outbound.over_hard_limit:
            responder.send_error(request.id, OutputBacklog(self._outbound.queued_bytes))
            return
        if len(self._tasks) >= self.max_background and not route.frees_resources:
            responder.send_error(request.id, ConnectionBusy(self.max_background))
            return
        try:
            job = route.handler(responder.params_of(request), request.id)
        except MAPPED_EXCEPTIONS as exc:
            responder.answer_inline(request.id, outcome_of(exc, f"admission of {request.method}"))
            if isinstance(exc, GreenletExit):
                raise
            return
        task = _Task(request.id, request.method, job, responder.into)
        # In the table first: should anything below fail, the last-resort guard finds the task
        # unstarted and settles it (`answer_unstarted`), so its reservations are released and it is answered.
        self._tasks[wire.id_key(request.id)] = task
        greenlet = Greenlet(self._run_task, task)
        greenlet.name = f"{request.method}#{request.id}"
        greenlet.rawlink(lambda _g: self._finish(task, KILLED))
        task.greenlet = greenlet
        greenlet.start()
        acknowledgement = job.acknowledge()
        if acknowledgement is not None and acknowledgement.then is not None and responder.into is not None:
            # A batch's array waits for its other members, while this job runs from the next yield:
            # what must follow the acknowledgement (a turn's `running`) cannot wait behind the array.
            _run_step(acknowledgement.then, request.id)
            acknowledgement = Reply(acknowledgement.result)
        if acknowledgement is not None:
            # Answered now; the slot stays taken, and the id is free again (its request is answered).
            del self._tasks[task.key]
            task.key, task.acknowledged = object(), True
            self._tasks[task.key] = task
            responder.answer(request.id, Outcome(result=responder.translate(request.method, acknowledgement)))

    def _run_task(self, task: _Task) -> None:
        outcome = KILLED  # stays so if something outcome_of does not map ends the body
        try:
            outcome = Outcome(result=task.job.run())
        except MAPPED_EXCEPTIONS as exc:
            outcome = outcome_of(exc, f"{task.method} #{wire.id_text(task.request_id)}")
            if isinstance(exc, GreenletExit):
                raise  # a kill ends the greenlet as a kill
        finally:
            self._finish(task, outcome)

    def _finish(self, task: _Task, outcome: Outcome) -> None:
        """Release, settle and answer a background request — exactly once, whatever called it."""
        if task.done:
            return
        task.done = True
        self._tasks.pop(task.key, None)
        current = gevent.getcurrent()
        settling = current is task.greenlet
        if settling:
            self._settling.add(current)
        try:
            outcome = task.job.settle(outcome)
        except Exception as exc:
            outcome = outcome_of(exc, f"settling {task.method} #{wire.id_text(task.request_id)}")
        finally:
            if settling:
                self._settling.discard(current)
        if task.acknowledged:
            try:
                task.job.report(outcome)
            except Exception:
                log.exception("reporting the end of %s #%s failed", task.method, wire.id_text(task.request_id))
            return
        responder = self._responder
        if outcome.result is not None and outcome.error is None:
            outcome.result = responder.translate(task.method, outcome.result)
        into, responder.into = responder.into, task.batch  # the task's own place, whatever line is being handled
        try:
            responder.answer(task.request_id, outcome)
        finally:
            responder.into = into

    def answer_unstarted(self, request_id: wire.RequestId, detail: str) -> bool:
        """After the line that admitted `request_id` failed: False when no job of that id is in flight.

        A job whose greenlet never started is answered here (nothing else ever will); a started
        one is answered by its body or its rawlink."""
        task = self._tasks.get(wire.id_key(request_id))
        if task is None:
            return False
        if task.greenlet is None or not (task.greenlet.started or task.greenlet.dead):
            self._finish(task, Outcome(error=InternalError(f"Internal error while admitting {task.method}: {detail}")))
        return True

    def on_cancel_request(self, params: Any) -> None:
        """`$/cancel_request`: end the job of that id, answered -32800 unless it cancels by itself."""
        if not isinstance(params, dict) or "requestId" not in params or not wire.is_valid_id(params["requestId"]):
            raise InvalidParams("$/cancel_request needs a requestId")
        task = self._tasks.get(wire.id_key(params["requestId"]))
        if task is None or task.done:
            return  # unknown or finished: the normal response stands
        if task.job.cancel():
            return
        # Settle now — slot and reservations released before the -32800 is queued (S14) — and
        # let the kill land on the next hub turn; the greenlet's own _finish is then a no-op.
        self._finish(task, KILLED)
        if task.greenlet is not None and not task.greenlet.dead:
            self._dying.add(task.greenlet)
            task.greenlet.rawlink(self._dying.discard)
            task.greenlet.kill(block=False)

    # -- shutdown ----------------------------------------------------------------------------
    @property
    def active(self) -> int:
        return len(self._tasks)

    def greenlets(self) -> list[Greenlet]:
        """Every background greenlet still alive, answered or not."""
        running = [t.greenlet for t in self._tasks.values() if t.greenlet is not None]
        return running + [g for g in self._dying | self._settling if g not in running]

    def drain(self, grace: float) -> int:
        """Stop admitting, ask every job to finish, wait up to `grace`, then kill and join the rest."""
        self.admitting = False
        for task in list(self._tasks.values()):
            try:
                task.job.shutdown()
            except Exception:
                log.exception("shutdown of %s failed", task.method)
        running = self.greenlets()
        if running:
            gevent.joinall(running, timeout=grace)
        survivors = [g for g in self.greenlets() if not g.dead]
        # One still settling (its answer waits for the store's commit) ends by itself, within
        # the prompt's STORED_WAIT; a kill there would lose its answer.
        killed = [g for g in survivors if g not in self._settling]
        for greenlet in killed:
            greenlet.kill(block=False)
        if killed:
            log.warning("killed %d background requests still running after %.1fs", len(killed), grace)
        if survivors:
            gevent.joinall(survivors, timeout=2)
        for task in list(self._tasks.values()):
            # Agent code that swallowed the kill (a bare except): answer and release anyway;
            # the greenlet is abandoned to the process exit (S14, S16).
            log.error("%s #%s ignored its kill; answered now, and recorded as aborted", task.method, wire.id_text(task.request_id))
            self._finish(task, KILLED)
        return len(killed)


class Refusals:
    """The answers no handler gives: to input that never became a message a handler reads (it did
    not decode, was over the size limit, or was read but never dispatched at shutdown), and to a
    line whose handling failed unexpectedly (the last-resort guard)."""

    def __init__(self, responder: Responder, jobs: BackgroundJobs, client: ClientRequests) -> None:
        self._responder = responder
        self._jobs = jobs  # an id in flight is not answered again: its answer is its request's
        self._client = client  # a malformed response may be the one a call of ours waits for

    def undecodable(self, exc: RpcError) -> None:
        """Answer what did not decode into a message, as its kind requires (S6: a notification never)."""
        if isinstance(exc, wire.MalformedResponse):
            if not self._client.fail_malformed(exc.response_id, exc.message):
                self._responder.send_error(None, exc)  # nobody waits for it: said as for any unreadable message
        elif isinstance(exc, wire.InvalidMessage):
            self._responder.send_error(exc.request_id, exc)
        elif isinstance(exc, wire.UnrepresentableNumber):
            self._unrepresentable(exc)
        else:
            self._responder.send_error(None, exc)

    def _unrepresentable(self, exc: wire.UnrepresentableNumber) -> None:
        """Valid JSON with a number Python cannot carry: a request gets -32602, a notification nothing."""
        source = exc.source
        if isinstance(source, wire.Request):
            if self._jobs.in_flight(source.id):
                self._responder.send_error(source.id, InvalidRequest(f"Request id {wire.id_text(source.id)} is already in flight"))
            else:
                self._responder.send_error(source.id, exc)
        else:
            log.warning("ignoring a %s notification: %s", wire.excerpt(source.method), exc.message)

    def line(self, error: RpcError, request_id: wire.RequestId = None) -> None:
        """Answer input that never became a message with `error`: with the id of its request when
        one was recovered and no request of that id is in flight (its answer is that request's), else id null."""
        if request_id is not None and self._jobs.in_flight(request_id):
            request_id = None
        self._responder.send_error(request_id, error)

    def unreadable_at_shutdown(self, exc: Exception) -> None:
        """A line read at shutdown that does not decode: its request's id when the error names one, else id null."""
        if isinstance(exc, wire.InvalidMessage):
            self._responder.send_error(exc.request_id, exc)
        elif isinstance(exc, RpcError):
            self._responder.send_error(None, exc)
        else:  # whatever the decoder trips on, the shutdown goes on
            log.warning("unreadable line at shutdown: %s", type(exc).__name__)
            self._responder.send_error(None, InvalidRequest("Invalid request"))

    def unread(self, message: wire.Message) -> None:
        """A message read at shutdown but never dispatched: a request gets -32800, anything else nothing."""
        if not isinstance(message, wire.Request):
            return
        if self._jobs.in_flight(message.id):
            self._responder.send_error(message.id, InvalidRequest("Request id is already in flight"))
        else:
            self._responder.send_error(message.id, RequestCancelled("The agent is shutting down"))

    def last_resort(self, message: wire.Message | None, exc: BaseException, line: bytes = b"") -> None:
        """Answer a line whose handling failed unexpectedly, at most once and only if unanswered."""
        try:
            log.error("handling a line failed (%s); answered by the last-resort guard", _kind(message), exc_info=exc)
            detail = one_line(f"{type(exc).__name__}: {exc}", 200)
            if message is None and isinstance(exc, MemoryError):
                self.line(OutOfMemory("The line could not be decoded within the memory available; it was dropped"),
                          request_id_of(line))
            elif message is None:
                self._responder.send_error(None, ParseError(f"Parse error: the line could not be decoded ({detail})"))
            elif isinstance(message, wire.Request) and not self._responder.line_answered:
                if not self._jobs.answer_unstarted(message.id, detail):
                    self._responder.send_error(message.id, InternalError(f"Internal error while handling {wire.excerpt(message.method)}: {detail}"))
            # a notification is never answered, and a response is not a request
        except Exception:
            log.exception("the last-resort guard itself failed")


class Endpoint:
    """Routes messages from one client: decodes each line, runs control requests inline, admits
    background ones, and guards every line so a request is answered exactly once.

    What it holds, one concern each: `table` (which handler a method goes to), `responder` (the
    one response an outcome stands for), `jobs` (the background requests in flight), `refusals`
    (the answers no handler gives) and `client` (the requests we send the client).
    """

    def __init__(
        self,
        outbound: Outbound,
        routes: Mapping[str, Route] | None = None,
        *,
        fallback: Callable[[str], Route | None] | None = None,
        notifications: Mapping[str, Callable[[Any], None]] | None = None,
        max_background: int = 32,
    ) -> None:
        """`routes`, `fallback` and `notifications` start the table; features add theirs with `add_feature`."""
        self.outbound = outbound
        self.table = MethodTable(routes, fallback, notifications)
        self.responder = Responder(outbound)
        self.jobs = BackgroundJobs(self.responder, outbound, max_background)
        self.table.notifications.setdefault("$/cancel_request", self.jobs.on_cancel_request)
        self.client = ClientRequests(outbound)
        self.refusals = Refusals(self.responder, self.jobs, self.client)
        #: Asked before a known method's request runs: an error refuses it (ACP: not initialized).
        self.gate: Callable[[str], RpcError | None] | None = None
        #: Whether a line may be a JSON-RPC batch (a JSON array); while False one is refused -32600.
        self.accept_batches = False

    # -- what the connection and the features reach through the endpoint ----------------------
    @property
    def routes(self) -> dict[str, Route]:
        return self.table.routes

    @routes.setter
    def routes(self, routes: dict[str, Route]) -> None:
        self.table.routes = routes

    @property
    def fallback(self) -> Callable[[str], Route | None] | None:
        return self.table.fallback

    @property
    def notifications(self) -> dict[str, Callable[[Any], None]]:
        return self.table.notifications

    def add_feature(self, feature: object) -> None:
        """Register a feature's marked handlers (`MethodTable.add_feature`)."""
        self.table.add_feature(feature)

    @property
    def dialect(self) -> Dialect | None:
        return self.responder.dialect

    @dialect.setter
    def dialect(self, dialect: Dialect | None) -> None:
        self.responder.dialect = dialect

    @property
    def admitting(self) -> bool:
        return self.jobs.admitting

    @admitting.setter
    def admitting(self, admitting: bool) -> None:
        self.jobs.admitting = admitting

    @property
    def active(self) -> int:
        """Background requests in flight, answered or not."""
        return self.jobs.active

    def greenlets(self) -> list[Greenlet]:
        """Every background greenlet still alive, answered or not."""
        return self.jobs.greenlets()

    def drain(self, grace: float) -> int:
        """Shutdown: end the background requests (`BackgroundJobs.drain`); how many had to be killed."""
        return self.jobs.drain(grace)

    def reject_line(self, error: RpcError, request_id: wire.RequestId = None) -> None:
        """Answer input that never became a message (a line over the size limit, or one that did not fit in memory)."""
        self.refusals.line(error, request_id)

    # -- the receive loop's entry point ------------------------------------------------------
    def handle_line(self, line: bytes) -> None:
        """Handle one framed line; never raises for any input (a kill, GreenletExit, passes through).

        Whatever escapes the handling of a line is logged and answered by a last-resort guard,
        unless the line's request was answered already or a started greenlet owns its answer:
        a request is never answered twice.
        """
        if line.endswith(b"\n"):
            line = line[:-1]
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line.strip():
            return
        responder = self.responder
        message: wire.Message | None = None
        responder.line_answered = False
        try:
            try:
                decoded = self._decode(line)
            except RpcError as exc:
                self.refusals.undecodable(exc)
                return
            if isinstance(decoded, wire.Batch):
                self._handle_batch(decoded)
                return
            message = decoded
            if isinstance(message, wire.Request):
                responder.line_key = wire.id_key(message.id)
            self.handle(message)
        except (Exception, gevent.Timeout) as exc:  # a Timeout here is one the line's handling raised
            self.refusals.last_resort(message, exc, line)
        finally:
            responder.line_key = None

    def _decode(self, line: bytes) -> wire.Message | wire.Batch:
        return wire.decode_with_batches(line) if self.accept_batches else wire.decode(line)

    # -- JSON-RPC 2.0 batches, once `accept_batches` is set ------------------------------------
    def _handle_batch(self, batch: wire.Batch, unread: bool = False) -> None:
        """Each member as if it came alone, in order; the answers to its requests as one array,
        queued once the last is known (a background member's when its job ends).

        Between members the loop yields, as the receive loop does between lines. A kill
        (shutdown) ends the loop: members not handled yet are refused as unread lines are.
        `unread`: refuse every member so (the batch was read but never dispatched).
        """
        answers = BatchAnswers()
        started = 0
        try:
            for index, member in enumerate(batch.members):
                if started and not unread:
                    gevent.sleep(0)
                started = index + 1  # from here the member's handling answers it, even if killed
                self._handle_member(answers, index, member, unread)
        finally:
            for index in range(started, len(batch.members)):
                self._handle_member(answers, index, batch.members[index], unread=True)
            answers.sealed = True
            self.responder.send_if_complete(answers)

    def _handle_member(self, answers: BatchAnswers, index: int, member: wire.Message | RpcError, unread: bool) -> None:
        responder = self.responder
        responder.into, responder.line_answered = (answers, index), False
        message = None if isinstance(member, RpcError) else member
        if isinstance(member, wire.Request):
            answers.owe(index)  # until answered: inline below, or by the job admitted for it
        try:
            if isinstance(member, RpcError):
                self.refusals.undecodable(member)
            elif unread:
                self.refusals.unread(member)
            elif isinstance(member, wire.Request) and answers.held_bytes > self.outbound.limits.hard_limit:
                # Held answers are not in the output queue, whose limits pace every line: bound them here.
                responder.send_error(member.id, BatchTooLarge(answers.held_bytes, self.outbound.limits.hard_limit))
            else:
                if isinstance(member, wire.Request):
                    responder.line_key = wire.id_key(member.id)
                self.handle(member)
        except (Exception, gevent.Timeout) as exc:
            self.refusals.last_resort(message, exc)
        finally:
            responder.into, responder.line_key = None, None

    # -- dispatch ----------------------------------------------------------------------------
    def handle(self, message: wire.Message) -> None:
        if isinstance(message, wire.Request):
            self._handle_request(message)
        elif isinstance(message, wire.Notification):
            self._handle_notification(message)
        else:
            self.client.resolve(message)

    def _handle_request(self, request: wire.Request) -> None:
        route = self.table.route_of(request.method)
        if route is None:
            self.responder.send_error(request.id, MethodNotFound(wire.excerpt(request.method, 200)))
            return
        if self.jobs.in_flight(request.id):
            self.responder.send_error(request.id, InvalidRequest(f"Request id {wire.id_text(request.id)} is already in flight"))
            return
        refusal = self.gate(request.method) if self.gate is not None else None
        if refusal is not None:
            self.responder.send_error(request.id, refusal)
            return
        if route.kind is Kind.CONTROL:
            self._run_control(request, route)
        else:
            self.jobs.admit(request, route)

    def _handle_notification(self, note: wire.Notification) -> None:
        handler = self.table.notifications.get(note.method)
        if handler is None:
            log.debug("ignoring notification %s", note.method)
            return
        try:
            handler(note.params)
        except RpcError as exc:
            log.warning("bad %s notification: %s", note.method, exc.message)
        except Exception:
            log.exception("%s notification handler failed", note.method)

    def _run_control(self, request: wire.Request, route: Route) -> None:
        responder = self.responder
        try:
            result = route.handler(responder.params_of(request), request.id)
            result = responder.translate(request.method, result)
        except MAPPED_EXCEPTIONS as exc:
            responder.answer_inline(request.id, outcome_of(exc, f"control handler for {request.method}"))
            if isinstance(exc, GreenletExit):
                raise  # the reader is killed at shutdown: answered above, now go
            return
        responder.answer(request.id, Outcome(result=result))

    # -- shutdown ----------------------------------------------------------------------------
    def refuse_unread(self, line: bytes) -> None:
        """Shutdown: answer a line that was read but never dispatched; nothing of it runs.

        A request gets -32800 with its id (a prompt too: it never started, so it has no stop
        reason); notifications and responses are dropped. A line that is not a valid message
        gets the answer it would have got at any other time, so every line read is accounted
        for the same way.
        """
        line = line.rstrip(b"\r\n")
        if not line.strip():
            return
        try:
            message = self._decode(line)
        except Exception as exc:  # whatever the decoder trips on, the shutdown goes on
            self.refusals.unreadable_at_shutdown(exc)
            return
        if isinstance(message, wire.Batch):
            self._handle_batch(message, unread=True)
        else:
            self.refusals.unread(message)


def _run_step(step: Callable[[], None], request_id: wire.RequestId) -> None:
    """A post-response step; its failure is logged, never the request's."""
    try:
        step()
    except Exception:
        log.exception("post-response step of request %s failed", wire.id_text(request_id))


def _kind(message: wire.Message | None) -> str:
    if message is None:
        return "while decoding"
    if isinstance(message, wire.Response):
        return f"a response to id {wire.id_text(message.id)}"
    return f"{type(message).__name__.lower()} {wire.excerpt(message.method)}"
