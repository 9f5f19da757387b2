"""What a turn reaches through the runtime: its session's settings and stored state, MCP servers,
and the client terminals it runs (released when the turn ends).

`Turn` (agent.py) holds one `TurnRuntime` and delegates those methods to it. Each reach is a
callable or object the runtime hands the turn; a turn built without one (a unit test's) raises
RuntimeError naming what is missing, only when agent code uses it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from . import paths
from .context import ConnectionSnapshot
from .errors import CapabilityMissing
from .rpc.cancel import CancelToken
from .sessions import Session
from .turn_output import TurnOutput

if TYPE_CHECKING:
    # Loaded when a turn first uses them, not at start-up (see agent.py).
    from .conversation import ConversationTurn
    from .mcp.client import McpClientSession, McpTools
    from .terminals import Terminal, TurnTerminals


class SettingsAnnouncement(Protocol):
    """A settings change as history keeps it and as this client is sent it (`settings.Announcement`)."""

    @property
    def kept(self) -> dict[str, Any]: ...

    @property
    def sent(self) -> dict[str, Any]: ...


class TurnSettings(Protocol):
    """What a turn changes through its session's settings (`settings.SessionSettings` in the runtime)."""

    def set_mode(self, session: Session, mode_id: str) -> None: ...

    def set_config(self, session: Session, config_id: str, value: Any) -> Any: ...

    def config_options(self, session: Session, snapshot: ConnectionSnapshot) -> list[dict[str, Any]]: ...

    def mode_announcement(self, session: Session, snapshot: ConnectionSnapshot) -> SettingsAnnouncement: ...

    def config_announcement(self, session: Session, snapshot: ConnectionSnapshot) -> SettingsAnnouncement: ...


class TurnRuntime:
    """One turn's reach into its session's settings and store, MCP, and client terminals."""

    def __init__(self, session: Session, cwd: str, snapshot: ConnectionSnapshot, token: CancelToken, output: TurnOutput, *,
                 call_client: Callable[..., Any], send_client: Callable[[str, Any], None] | None,
                 mcp: Callable[[str, CancelToken], McpClientSession] | None, settings: TurnSettings | None,
                 history: Callable[[bool, int | None], Iterator[ConversationTurn]] | None,
                 save_state: Callable[[Session], None] | None) -> None:
        self._session = session
        self._cwd = cwd
        self._snapshot = snapshot
        self._token = token
        self._output = output  # settings changes are announced in the turn's order
        self._call_client = call_client
        self._send_client = send_client  # requests written without waiting (terminal cleanups)
        self._mcp = mcp
        self._settings = settings
        self._history = history
        self._save_state = save_state
        self._terminals: TurnTerminals | None = None  # made when the turn runs its first terminal

    def set_mode(self, mode_id: str) -> None:
        """Store the session's new mode, then announce it; neither after the turn's end (TurnEnded)."""
        self._output.check_open("set_mode")
        settings = self._changed_settings()
        settings.set_mode(self._session, mode_id)
        self._announce(settings.mode_announcement(self._session, self._snapshot))

    def set_config(self, config_id: str, value: Any) -> None:
        """Store a config option's new value, then announce every option; neither after the turn's end."""
        self._output.check_open("set_config")
        settings = self._changed_settings()
        settings.set_config(self._session, config_id, value)
        self._announce(settings.config_announcement(self._session, self._snapshot))

    def _announce(self, announcement: SettingsAnnouncement) -> None:
        self._output.announce(announcement.kept, announcement.sent)

    def _changed_settings(self) -> TurnSettings:
        if self._settings is None:
            raise RuntimeError("this turn was built without session settings")
        return self._settings

    def history(self, newest_first: bool, since_turn: int | None) -> Iterator[ConversationTurn]:
        """The session's earlier turns, read from the store a page at a time."""
        if self._history is None:
            raise RuntimeError("this turn was built without access to the store")
        return self._history(newest_first, since_turn)

    def save_state(self) -> None:
        """Store `session.state` now."""
        if self._save_state is None:
            raise RuntimeError("this turn was built without access to the store")
        self._save_state(self._session)

    def mcp(self, server: str, token: CancelToken | None) -> McpTools:
        """The MCP server named `server`, its calls bound to `token` (the turn's when None)."""
        from .errors import McpUnavailable
        from .mcp.client import McpTools

        if self._mcp is None:
            raise McpUnavailable("MCP is not available to this turn")
        bound = self._token if token is None else token
        return McpTools(self._mcp(server, bound), bound)

    def terminal(self, command: str, args: Sequence[str], *, cwd: str | None, env: Mapping[str, str] | None,
                 output_byte_limit: int | None) -> Terminal:
        """Start `command` in a client terminal that `close` releases; a relative `cwd` is the session's."""
        self._output.check_open("terminal")
        if not self._snapshot.has_terminal():
            raise CapabilityMissing("the client did not advertise the terminal capability (clientCapabilities.terminal)")
        return self._turn_terminals().create(command, args, env=env, output_byte_limit=output_byte_limit,
                                             cwd=paths.resolve(self._cwd, cwd) if cwd is not None else None)

    def close(self) -> None:
        """Release every terminal still open and start no more; never blocks nor raises."""
        if self._terminals is not None:
            self._terminals.close()

    def _turn_terminals(self) -> TurnTerminals:
        if self._terminals is None:
            if self._send_client is None:
                raise CapabilityMissing("this turn cannot run terminals: it has no way to release them")
            from .terminals import TurnTerminals

            self._terminals = TurnTerminals(self._session.session_id, self._token, self._call_client, self._send_client)
        return self._terminals
