"""The probe's prompts under ACP v2: a prompt's `Pending` is its whole turn.

Under v1 a prompt is answered when its turn ends, so the probe's checks wait on the response.
Under the v2 draft the response only acknowledges the prompt's insertion (`{messageId}`), and
the turn ends with the session's idle `state_update`, whose `stopReason` says why. A `Turn`
stands where the checks expect the prompt's `Pending`: it resolves once the turn is over, with
the response v1 would have given.

What v2 says, and how a turn reads it (the v2 draft schema, `StateUpdate`, `IdleStateUpdate`,
`PromptResponse`, `session/cancel`):

- the answer and the turn's updates may come in either order ("The corresponding user-message
  session update ... may arrive before or after this response"; a response "does not indicate
  ... that the agent has finished"): a turn whose idle update came first ends when its answer
  comes, and that order is no fault;
- an idle update ends a turn only once the turn is under way: its prompt was acknowledged, or
  the session reported `running` (or `requires_action`) since the prompt was sent. An idle
  update before either is a snapshot of the state the session was already in ("Repeated
  snapshots are idempotent, not additional work, completions"), not the turn's end;
- `stopReason: "error"` with its `error` (`ErrorStopReason`) is a turn that failed: it resolves
  as v1's error answer would, that error as the answer's, so -32000 ("Authentication
  required", as claude-agent-acp 0.101.0 ends a turn it cannot run) is read as a login;
- an answer that refuses the prompt (an error) is the end: no turn ran (as in v1). So is an
  answer that is not `{messageId}` (v1's `{stopReason}`, say): the turn is read from it, and the
  schema row, whose fault it is, names it; no other row counts it again.

Under v1 nothing here changes what the client does. The probe's agent is a `CheckedAgent` whose
client a `TurnFollower` follows (probe.py's `_launch`).
"""

from __future__ import annotations

from typing import Any

from ...rpc.wire import IdKey, id_key
from .client import AcpClient, Pending, Record

__all__ = ["Turn", "TurnFollower", "turn_answer"]

#: The states that say foreground work is under way (v2's StateUpdate).
ACTIVE_STATES = frozenset({"running", "requires_action"})


def turn_answer(request_id: Any, update: dict[str, Any]) -> dict[str, Any]:
    """The v1 answer a turn that ended with this idle `state_update` stands for: its stopReason as
    a result, or, for `stopReason: "error"`, the error it carries (ErrorStopReason) as an error."""
    stop = update.get("stopReason")
    if stop == "error":
        error = update.get("error")
        if not isinstance(error, dict):
            error = {"code": -32603, "message": "the turn ended with stopReason \"error\" and no error object"}
        return {"jsonrpc": "2.0", "id": request_id, "error": error}
    return {"jsonrpc": "2.0", "id": request_id, "result": {"stopReason": stop}}


class Turn(Pending):
    """A v2 prompt from its request to the end of its turn; resolves to a v1-shaped answer."""

    def __init__(self, request_id: Any, sent_at: float, session_id: str) -> None:
        super().__init__(request_id, "session/prompt", sent_at)
        self.session_id = session_id
        self.ack: Record | None = None  # the prompt's response (the acknowledgement)
        self.end: Record | None = None  # the idle state_update that ended the turn
        self.active = False  # the session reported running (or requires_action) since the prompt was sent
        self.idle_update: dict[str, Any] | None = None  # the idle update that ended it, while its answer is still to come


class TurnFollower:
    """Stands a `Turn` in for the `Pending` of each prompt an `AcpClient` sends (`request`,
    `prompt`, `pending_for` return it), and ends it as the v2 draft does."""

    def __init__(self, client: AcpClient) -> None:
        self.turns: dict[IdKey | None, Turn] = {}
        self._client = client
        client.send_listeners.append(self._sent)
        client.listeners.append(self._follow)

    def _sent(self, message: dict[str, Any]) -> None:
        params = message.get("params")
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        if message.get("method") == "session/prompt" and "id" in message and isinstance(session_id, str):
            key = id_key(message["id"])
            self.turns[key] = self._client.stand_ins[key] = Turn(message["id"], self._client.pending[key].sent_at, session_id)

    # -- in the reader greenlet, after each message is recorded ---------------------------------
    def _follow(self, message: dict[str, Any]) -> None:
        record = next(r for r in reversed(self._client.records) if r.direction == "in")  # the reader may have answered since
        if "method" not in message and "id" in message:
            turn = self.turns.get(id_key(message.get("id")))
            if turn is not None and not turn.done and turn.ack is None:
                self._answered(turn, record, message)
        elif message.get("method") == "session/update":
            params: dict[str, Any] = message["params"] if isinstance(message.get("params"), dict) else {}
            update = params.get("update")
            if isinstance(update, dict) and update.get("sessionUpdate") == "state_update":
                self._state(params.get("sessionId"), record, update)

    def _answered(self, turn: Turn, record: Record, message: dict[str, Any]) -> None:
        turn.ack = record
        result = message.get("result")
        if "error" in message or not (isinstance(result, dict) and isinstance(result.get("messageId"), str)):
            turn.resolve(message, record.t)  # refused (no turn ran), or not v2's answer: the schema row says so
        elif turn.idle_update is not None:  # its idle update came first: v2 allows either order
            turn.resolve(turn_answer(turn.id, turn.idle_update), record.t)

    def _state(self, session_id: Any, record: Record, update: dict[str, Any]) -> None:
        """A state_update: `running` puts the session's open turns under way; `idle` ends the oldest one under way."""
        open_turns = [t for t in self.turns.values() if t.session_id == session_id and not t.done and t.idle_update is None]
        if update.get("state") in ACTIVE_STATES:
            for under_way in open_turns:
                under_way.active = True
            return
        if update.get("state") != "idle":
            return
        turn = next((t for t in open_turns if t.ack is not None or t.active), None)
        if turn is None:
            return  # a snapshot of the state before the turn (or after agent-initiated work): no turn ends here
        turn.end = record
        if turn.ack is None:
            turn.idle_update = update  # ended before its answer came: it resolves with the answer
            return
        turn.resolve(turn_answer(turn.id, update), record.t)
