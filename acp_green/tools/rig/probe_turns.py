"""The probe's prompts under ACP v2: a prompt's `Pending` is its whole turn.

Under v1 a prompt is answered when its turn ends, so the probe's checks wait on the response.
Under the v2 draft the response is only an acknowledgement (`{messageId}`), and the turn ends
with the session's idle `state_update`. A `Turn` stands where the checks expect the prompt's
`Pending`: it resolves when the turn ends, with the response v1 would have given (the idle
update's `stopReason` as a result), or with the error that refused the prompt. What broke the
v2 shape on the way (a response that is no `{messageId}`, an idle update before the response)
is kept as the turn's `fault`, and the probe fails the row that waited for it, quoting the wire.
Under v1 nothing here changes what the client does. The probe's agent is a `CheckedAgent` whose
client a `TurnFollower` follows (probe.py's `_launch`).
"""

from __future__ import annotations

from typing import Any

from ...rpc.wire import IdKey, id_key
from .client import AcpClient, Pending, Record

__all__ = ["Turn", "TurnFollower"]


class Turn(Pending):
    """A v2 prompt from its request to its idle `state_update`; resolves to a v1-shaped answer."""

    def __init__(self, request_id: Any, sent_at: float, session_id: str) -> None:
        super().__init__(request_id, "session/prompt", sent_at)
        self.session_id = session_id
        self.ack: Record | None = None  # the prompt's response (the acknowledgement)
        self.end: Record | None = None  # the idle state_update that ended the turn
        self.fault = ""  # how the agent broke v2's turn shape, in words


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
            if isinstance(update, dict) and update.get("sessionUpdate") == "state_update" and update.get("state") == "idle":
                self._idle(params.get("sessionId"), record, update)

    def _answered(self, turn: Turn, record: Record, message: dict[str, Any]) -> None:
        turn.ack = record
        result = message.get("result")
        if "error" in message:
            turn.resolve(message, record.t)  # refused: no turn ran, the error is the answer (as in v1)
        elif not (isinstance(result, dict) and isinstance(result.get("messageId"), str)):
            shown = str(result)[:120]
            turn.fault = (f"session/prompt was answered {shown}: under v2 the answer is {{messageId}} at once, and the turn "
                          "ends with an idle state_update")
            turn.resolve(message, record.t)

    def _idle(self, session_id: Any, record: Record, update: dict[str, Any]) -> None:
        """The session's oldest open turn ended (a turn whose prompt is not yet answered ends too: a fault)."""
        turn = next((t for t in self.turns.values() if t.session_id == session_id and not t.done), None)
        if turn is None:
            return  # an idle update no prompt waits for (a resume's current state, agent-initiated work)
        if turn.ack is None:
            turn.fault = "the turn's idle state_update came before the prompt's response ({messageId})"
        turn.end = record
        answer = {"jsonrpc": "2.0", "id": turn.id, "result": {"stopReason": update.get("stopReason")}}
        turn.resolve(answer, record.t)
