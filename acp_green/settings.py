"""A session's mode and config options: their defaults, every change to them (from the client's
set_mode / set_config_option or from the agent inside a turn), and the wire form each client sees.

A change is stored before anything announces it, so a `session/load` after a
`current_mode_update` or `config_option_update` reports what that update said.

ACP v2 has no session modes: a v2 client sees the agent's modes as one more select option,
`mode` (category "mode"), set with `session/set_config_option` and announced with
`config_option_update`, so an agent with modes serves both versions unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .rpc import wire
from .agent import BOOLEAN_AS_SELECT, Agent, BooleanOption, ConfigOption
from .context import ConnectionSnapshot
from .sessions import Session, SessionRegistry

#: The config option a v2 client sets the session's mode with (unless the agent has its own `mode`).
MODE_OPTION_ID = "mode"


def client_shows_booleans(snapshot: ConnectionSnapshot) -> bool:
    """The client advertised `session.configOptions.boolean` (an object; absent or null is no),
    or speaks v2, where a boolean option needs no capability (v2's client capabilities have none)."""
    if not snapshot.v1:
        return True
    session = snapshot.client_capabilities.get("session")
    options = session.get("configOptions") if isinstance(session, Mapping) else None
    return isinstance(options, Mapping) and isinstance(options.get("boolean"), Mapping)


@dataclass(frozen=True, slots=True)
class Announcement:
    """A turn's change of the session's settings: the update history keeps, and the one sent.

    History keeps one shape whatever the client, since a session moves between clients and
    versions: v1's, without the `mode` option a v2 client is sent, and a boolean option as a
    boolean (a replay to a client that cannot show one sends its select: `booleans_as_selects`)."""

    kept: dict[str, Any]
    sent: dict[str, Any]


def booleans_as_selects(update_json: bytes) -> bytes:
    """A stored `config_option_update` for a client that cannot show booleans: each boolean
    option as the "true"/"false" select it is offered as (BooleanOption.to_wire)."""
    update = wire.loads(update_json)
    options = update.get("configOptions")
    if not isinstance(options, list) or not any(isinstance(o, dict) and o.get("type") == "boolean" for o in options):
        return update_json
    update["configOptions"] = [
        {**o, "type": "select", "currentValue": "true" if o.get("currentValue") else "false",
         "options": [{"value": v, "name": n} for v, n in BOOLEAN_AS_SELECT]}
        if isinstance(o, dict) and o.get("type") == "boolean" else o
        for o in options]
    return wire.encode_json(update)


class SessionSettings:
    """The agent's modes and config options applied to sessions; shared by the session methods and every turn."""

    def __init__(self, agent: Agent, sessions: SessionRegistry) -> None:
        self.agent = agent
        self.sessions = sessions

    def apply_defaults(self, session: Session) -> None:
        """A new session starts in the first mode with every option at its default."""
        if self.agent.modes:
            session.record.mode_id = self.agent.modes[0].id
        for option in self.agent.config_options:
            session.record.config[option.id] = option.default

    def knows_mode(self, mode_id: Any) -> bool:
        return any(m.id == mode_id for m in self.agent.modes)

    def modes_as_option(self, snapshot: ConnectionSnapshot) -> bool:
        """This client sees the modes as the `mode` config option: it speaks v2, and the agent has
        modes and no option of that id."""
        return not snapshot.v1 and bool(self.agent.modes) and self.option(MODE_OPTION_ID) is None

    def mode_option(self, session: Session) -> dict[str, Any]:
        """The modes as one select option, in v1's wire form (the v2 dialect renames `id`)."""
        options = []
        for mode in self.agent.modes:
            value = {"value": mode.id, "name": mode.name}
            if mode.description:
                value["description"] = mode.description
            options.append(value)
        return {"id": MODE_OPTION_ID, "name": "Mode", "category": "mode", "type": "select",
                "currentValue": session.record.mode_id or self.agent.modes[0].id, "options": options}

    def mode_announcement(self, session: Session, snapshot: ConnectionSnapshot) -> Announcement:
        """How a turn's change of the session's mode is kept in history and sent to this client."""
        kept = {"sessionUpdate": "current_mode_update", "currentModeId": session.record.mode_id}
        if self.modes_as_option(snapshot):
            return Announcement(kept, {"sessionUpdate": "config_option_update", "configOptions": self.config_options(session, snapshot)})
        return Announcement(kept, kept)

    def config_announcement(self, session: Session, snapshot: ConnectionSnapshot) -> Announcement:
        """How a turn's change of a config option is kept in history and sent to this client."""
        sent = {"sessionUpdate": "config_option_update", "configOptions": self.config_options(session, snapshot)}
        kept = {"sessionUpdate": "config_option_update", "configOptions": self._options(session, booleans=True, mode_option=False)}
        return Announcement(kept, sent)

    def option(self, config_id: Any) -> ConfigOption | None:
        return next((o for o in self.agent.config_options if o.id == config_id), None)

    def set_mode(self, session: Session, mode_id: str) -> None:
        """Store `mode_id` as the session's mode; ValueError if the agent offers no such mode."""
        if not self.knows_mode(mode_id):
            raise ValueError(f"unknown mode {wire.excerpt(str(mode_id))!r}")
        session.record.mode_id = mode_id
        self.sessions.save(session)

    def set_config(self, session: Session, config_id: str, value: Any) -> Any:
        """Store option `config_id` as `value` (a boolean option also takes "true"/"false");
        returns the value stored. ValueError for an unknown option or a value it does not offer."""
        option = self.option(config_id)
        if option is None:
            raise ValueError(f"unknown config option {wire.excerpt(str(config_id))!r}")
        stored = option.coerce(value)
        session.record.config[config_id] = stored
        self.sessions.save(session)
        return stored

    def state(self, session: Session, snapshot: ConnectionSnapshot) -> dict[str, Any]:
        """The `modes` and `configOptions` a session/new, load or resume answer carries."""
        state: dict[str, Any] = {}
        if self.agent.modes:
            state["modes"] = {
                "currentModeId": session.record.mode_id or self.agent.modes[0].id,
                "availableModes": [m.to_wire() for m in self.agent.modes],
            }
        if self.agent.config_options or self.modes_as_option(snapshot):
            state["configOptions"] = self.config_options(session, snapshot)
        return state

    def config_options(self, session: Session, snapshot: ConnectionSnapshot) -> list[dict[str, Any]]:
        """Every option with its current value, booleans as this client can show them."""
        return self._options(session, booleans=client_shows_booleans(snapshot), mode_option=self.modes_as_option(snapshot))

    def _options(self, session: Session, *, booleans: bool, mode_option: bool) -> list[dict[str, Any]]:
        wire_options = [self.mode_option(session)] if mode_option else []
        for option in self.agent.config_options:
            current = session.record.config.get(option.id, option.default)
            if isinstance(option, BooleanOption):
                wire_options.append(option.to_wire(current, boolean=booleans))
            else:
                wire_options.append(option.to_wire(current))
        return wire_options
