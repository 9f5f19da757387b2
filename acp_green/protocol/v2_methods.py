"""ACP v2's new client requests: `auth/login`, `auth/logout`, `tool_call/cancel`, `terminal/cancel`.

Their routes serve protocol version 2 only (`Route.versions`): under version 1 each is -32601
with the message any unknown method gets. All run in the receive loop, in receive
order (S2), and none waits: a cancel is answered as soon as it is accepted, which the schema
says does not mean the work has stopped (the agent confirms with a final status).
"""

from __future__ import annotations

from typing import Any

from ..agent import Agent, SessionView
from ..errors import MethodNotFound, NotCancellable, UnknownSession
from ..rpc import wire
from ..rpc.endpoint import control
from ..rpc.params import Params
from .access import SessionAccess
from .connection import implements_logout, log_in
from .dialect_v2 import V2_ONLY
from .prompt import PromptLedger


class V2Methods:
    """Logging in and out the v2 way, and cancelling one tool call or one terminal of a session."""

    def __init__(self, agent: Agent, access: SessionAccess, prompts: PromptLedger) -> None:
        self.agent = agent
        self.access = access
        self.context = access.context
        self.prompts = prompts  # each session's running turn, whose tool calls may be cancelled

    @control("auth/login", versions=V2_ONLY)
    def auth_login(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        """v1's `authenticate`: the agent's `authenticate` hook accepts or refuses (raises)."""
        log_in(self.agent, self.context, Params(params, "auth/login"))
        return {}

    @control("auth/logout", versions=V2_ONLY)
    def auth_logout(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        """The connection counts as not authenticated afterwards; the agent's `logout` hook runs
        first when it has one. v2 requires both methods of an agent that advertises auth methods,
        so one without the hook still logs out (the runtime forgets the login); an agent with
        neither answers -32601, as v1's `logout` does."""
        Params(params, "auth/logout")
        has_hook = implements_logout(self.agent)
        if not has_hook and not self.agent.auth_methods:
            raise MethodNotFound("auth/logout")
        if has_hook:
            self.agent.logout(self.context.snapshot)
        self.context.authenticated(None)
        return {}

    @control("tool_call/cancel", versions=V2_ONLY)
    def tool_call_cancel(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        """Set the token of one tool call of the session's running turn; the turn goes on.

        -32002 for an unknown session; -32602 `not_cancellable` when no turn is running or it has
        no such tool call, the tool call is final, or it was not announced `cancellable`.
        Repeating an accepted cancel is accepted again."""
        checked = Params(params, "tool_call/cancel")
        session_id = checked.identifier("sessionId")
        tool_call_id = checked.identifier("toolCallId")
        self.access.require_auth()
        job = self.prompts.get(session_id)
        if job is None:
            self._known_session(session_id)
            raise NotCancellable("toolCallId", tool_call_id, "no turn is running in this session")
        job.turn.cancel_tool_call(tool_call_id)
        return {}

    @control("terminal/cancel", versions=V2_ONLY)
    def terminal_cancel(self, params: Any, _id: wire.RequestId) -> dict[str, Any]:
        """The agent's `cancel_terminal` hook accepts (returns) or refuses; by default every
        terminal is unknown (-32602 `not_cancellable`). -32002 for an unknown session."""
        checked = Params(params, "terminal/cancel")
        session_id = checked.identifier("sessionId")
        terminal_id = checked.identifier("terminalId")
        self.access.require_auth()
        session = self.access.sessions.live(session_id)
        if session is None:
            self._known_session(session_id)
            raise NotCancellable("terminalId", terminal_id, "the session is not open, so none of its terminals runs")
        self.agent.cancel_terminal(SessionView.of(session), terminal_id, self.context.snapshot)
        return {}

    def _known_session(self, session_id: str) -> None:
        """UnknownSession (-32002) unless the session is live or stored; never revives it."""
        if self.access.sessions.live(session_id) is None and self.prompts.store.load_session(session_id) is None:
            raise UnknownSession(session_id)
