"""Who may touch a session: the auth check every session method runs, and the session a request names."""

from __future__ import annotations

from ..agent import Agent
from ..context import ConnectionContext
from ..errors import AuthRequired
from ..rpc.params import Params
from ..sessions import Session, SessionRegistry


class SessionAccess:
    """Checks authentication against the live context, then finds sessions."""

    def __init__(self, agent: Agent, context: ConnectionContext, sessions: SessionRegistry) -> None:
        self.agent = agent
        self.context = context
        self.sessions = sessions

    def require_auth(self) -> None:
        """-32000 auth_required when the agent advertises auth methods and none was used yet."""
        if self.agent.auth_methods and not self.context.snapshot.authenticated:
            raise AuthRequired("Authentication required: call authenticate with one of the advertised authMethods")

    def named_session(self, params: Params) -> Session:
        """The session `sessionId` names, after the auth check (a stored session is no way around it)."""
        session_id = params.identifier("sessionId")
        self.require_auth()
        return self.sessions.get(session_id)
