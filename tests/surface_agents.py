"""Test agents for logout, config options and rich prompts, on the public API only; served with
`--agent tests.surface_agents:NAME`. Each name says what it does that the demo agent does not."""

from __future__ import annotations

from typing import Any

from acp_green import Agent, AuthMethod, BooleanOption, Mode, SelectOption, SessionView, Turn
from acp_green.blocks import AudioBlock, ImageBlock, ResourceBlock, ResourceLinkBlock, TextBlock
from acp_green.context import ConnectionSnapshot
from acp_green.errors import InvalidParams


class LogsOutAgent(Agent):
    """Requires `authenticate`, implements `logout`; each prompt says how many logouts it saw."""

    name = "logs-out"
    auth_methods = (AuthMethod("token", "Token"),)

    def __init__(self) -> None:
        self.logouts = 0

    def logout(self, snapshot: ConnectionSnapshot) -> None:
        self.logouts += 1

    def prompt(self, turn: Turn) -> str:
        turn.say(f"logouts: {self.logouts}")
        return "end_turn"


class LogsOutWithoutAuthAgent(LogsOutAgent):
    """Implements `logout` but advertises no auth method: sessions never need `authenticate`."""

    auth_methods = ()


class SettingsAgent(Agent):
    """Two modes, a select and a boolean option. Its hooks log each client change in the session's
    state and refuse mode `locked`; prompts: `/mode ID` and `/set ID VALUE` (JSON true/false or a
    string) change settings from inside the turn, `/hooks` says what the hooks saw."""

    name = "settings"
    modes = (Mode("ask", "Ask"), Mode("code", "Code"), Mode("locked", "Locked"))
    config_options = (
        SelectOption("model", "Model", (("fast", "Fast"), ("slow", "Slow")), "fast"),
        BooleanOption("verbose", "Verbose", default=False, description="Say more"),
    )

    def mode_changed(self, session: SessionView, mode_id: str, snapshot: ConnectionSnapshot) -> None:
        if mode_id == "locked":
            raise InvalidParams("session/set_mode: mode 'locked' cannot be chosen by the client")
        session.state.setdefault("hooks", []).append(f"mode {session.mode_id}->{mode_id}")

    def config_changed(self, session: SessionView, config_id: str, value: Any, snapshot: ConnectionSnapshot) -> None:
        session.state.setdefault("hooks", []).append(f"config {config_id}={value!r}")

    def prompt(self, turn: Turn) -> str:
        command, _, rest = turn.text.partition(" ")
        try:
            if command == "/mode":
                turn.set_mode(rest)
            elif command == "/set":
                config_id, _, value = rest.partition(" ")
                turn.set_config(config_id, {"true": True, "false": False}.get(value, value))
            elif command == "/hooks":
                turn.say("; ".join(turn.session.state.get("hooks", [])))
        except ValueError as exc:
            turn.say(f"refused: {exc}")
        turn.say(f" [mode={turn.session.mode_id} config={sorted(turn.session.config.items())}]")
        return "end_turn"


class ModeOptionAgent(Agent):
    """Has modes and its own config option named `mode`, which a v2 client sees instead of the modes."""

    name = "mode-option"
    modes = (Mode("ask", "Ask"), Mode("code", "Code"))
    config_options = (SelectOption("mode", "Style", (("a", "A"), ("b", "B")), "a"),)

    def prompt(self, turn: Turn) -> str:
        return "end_turn"


class ModesOnlyAgent(Agent):
    """Has modes, each with a description, and no config option: a v2 client sees only the `mode` option."""

    name = "modes-only"
    modes = (Mode("plan", "Plan", "Think first"), Mode("act", "Act", "Change files"))

    def prompt(self, turn: Turn) -> str:
        return "end_turn"


class ReadsEveryBlockAgent(Agent):
    """Accepts audio and embedded resources (not images); says what each typed block was."""

    name = "reads-every-block"
    accepts_audio = True
    accepts_embedded_context = True

    def prompt(self, turn: Turn) -> str:
        for block in turn.blocks:
            if isinstance(block, TextBlock):
                turn.say(f"text:{block.text}|")
            elif isinstance(block, AudioBlock):
                turn.say(f"audio:{block.mime_type}:{block.decoded()!r}|")
            elif isinstance(block, ResourceBlock):
                turn.say(f"resource:{block.uri}:{block.mime_type}:{block.decoded()!r}|")
            elif isinstance(block, ResourceLinkBlock):
                turn.say(f"link:{block.uri}:{block.name}|")
            elif isinstance(block, ImageBlock):
                turn.say("image (never admitted)|")
        turn.say(f"text={turn.text!r}")
        return "end_turn"


class NoticesAgent(Agent):
    """Notices, compaction and named tool calls (stable v1 of SDK 2.4.0). Prompts: `/notice
    SEVERITY TITLE` sends a notice with a description; `/compact` reports a compaction: started,
    two summary chunks, completed with its summary; `/named` a tool call and an update each with
    a `name`. Each then says what the send calls returned (`sent=True`: it went to the client)."""

    name = "notices"

    def prompt(self, turn: Turn) -> str:
        command, _, rest = turn.text.partition(" ")
        if command == "/notice":
            severity, _, title = rest.partition(" ")
            sent = turn.notice(title, severity=severity, description="details here")
            turn.say(f"sent={sent}")
        elif command == "/compact":
            compaction = turn.compaction(compaction_id=rest or None)
            chunks = [compaction.summary_chunk("Summarised "), compaction.summary_chunk({"type": "text", "text": "the chat"})]
            done = compaction.complete(summary=[{"type": "text", "text": "Summarised the chat"}])
            turn.say(f"sent={[compaction.sent, *chunks, done]}")
        elif command == "/named":
            call = turn.tool_call(title="Read a.py", kind="read", status="in_progress", name="read_file")
            call.complete(name="read_file_v2")
            turn.say("named")
        else:
            turn.say(turn.text)
        return "end_turn"
