"""One chat's conversation: the prompt, the turns, the keys, and the sessions it opens.

Keys: Ctrl-C during a turn cancels it (session/cancel; open questions are withdrawn); a second
Ctrl-C, or one at the prompt or while chat waits for the agent to answer, quits at once (`Quit`).
Ctrl-D at the prompt quits; in a terminal, Ctrl-D during a turn cancels it and quits once the
agent has ended it. From a pipe the end of input ends chat only after the running turn (a script
of prompts runs to its end). A wait for the agent's answer that lasts STATUS_AFTER seconds (a
turn: SILENT_TURN_AFTER seconds with nothing from the agent) gets one status line saying what is
awaited and how to quit.

Chat's own commands, `/sessions` and `/load ID`, are handled here (session/list, session/load or
session/resume); every other line starting with `/` goes to the agent as its slash command.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any

import click
import gevent
from gevent import subprocess
from gevent.event import Event
from gevent.greenlet import Greenlet

from .chat_ask import Asker, LineSource
from .chat_history import MAX_LISTED, History, SessionSwitch, discard_session, session_lines
from .chat_render import Renderer, Screen
from .chat_text import harmless
from .client import AgentProcess, Pending

#: Seconds an answer may take before chat says what it waits for.
STATUS_AFTER = 3.0
#: Seconds a turn may stay silent (nothing at all from the agent) before chat says so.
SILENT_TURN_AFTER = 10.0
#: The exit code of a chat ended by Ctrl-C (the shell's 128 + SIGINT).
INTERRUPTED = 130
CHAT_COMMANDS = ("/sessions", "/load ID")


class AgentGone(Exception):
    """The agent stopped talking (exited or closed its output) while chat waited for it."""


class Quit(Exception):
    """Chat ends now, with exit code `code`, after saying `said` (one line)."""

    def __init__(self, code: int, said: str) -> None:
        super().__init__(said)
        self.code = code
        self.said = said


def auth_method_ids(info: dict[str, Any]) -> list[str]:
    """The ids of the logins an `initialize` result offers (authMethods), in its order."""
    methods = info.get("authMethods")
    if not isinstance(methods, list):
        return []
    return [m["id"] for m in methods if isinstance(m, dict) and isinstance(m.get("id"), str)]


def not_started(message: dict[str, Any], offered: list[str]) -> str:
    """What chat says when `session/new` was refused; for a login refusal, how to log in."""
    said = f"chat: the agent did not start a session: {harmless(message.get('error') or message.get('result'))}"
    if is_login_refusal(message.get("error")) and offered:
        said += ("\nchat: it asks for a login first: run chat again with --authenticate ID, where ID is one of "
                 + ", ".join(harmless(method) for method in offered))
    return said


def is_login_refusal(error: Any) -> bool:
    """ACP's "authentication required": -32000 that no data.reason says is something else (busy)."""
    if not isinstance(error, dict) or error.get("code") != -32000:
        return False
    data = error.get("data")
    reason = data.get("reason") if isinstance(data, dict) else None
    return reason in (None, "auth_required")


def log_in(agent: AgentProcess, screen: Screen, wait: Callable[[Pending, str], dict[str, Any]], offered: list[str],
           method_id: str) -> bool:
    """`authenticate` with `method_id`; False (said) when the agent does not offer it or refuses."""
    if method_id not in offered:
        shown = ", ".join(harmless(method) for method in offered) or "none"
        screen.note(f"chat: the agent offers no login {harmless(method_id)} (its authMethods: {shown})")
        return False
    message = wait(agent.request("authenticate", {"methodId": method_id}), "authenticate")
    if "error" in message:
        screen.note(f"chat: the login {harmless(method_id)} was refused: {error_text(message['error'])}")
        return False
    return True


def gone_reason(agent: AgentProcess) -> str:
    """Why the agent is gone, in a few words: its exit status and the last line of its stderr."""
    try:
        code = agent.proc.wait(timeout=2)
        if agent.remote is not None:
            said = "ended the connection" if code == 0 else "lost the connection"
        else:
            said = f"exited with code {code}" if code >= 0 else f"was killed by {signal.Signals(-code).name}"
    except subprocess.TimeoutExpired:  # still running with its output closed
        said = "closed its output"
    last = agent.stderr_text(timeout=2)[-2000:].strip().splitlines()
    whose = "the link says" if agent.remote is not None else "its stderr ends"
    return said + (f" ({whose}: {harmless(last[-1][:300])})" if last else "")


def error_text(error: Any) -> str:
    """A JSON-RPC error as `message (code)`, made harmless."""
    error = error if isinstance(error, dict) else {}
    return harmless(f"{error.get('message')} ({error.get('code')})")


class Conversation:
    """The prompt loop of one chat with one agent; `quitting` is set by a Ctrl-C that quits."""

    def __init__(self, agent: AgentProcess, asker: Asker, screen: Screen, lines: LineSource, cwd: str,
                 interactive: bool, quitting: Event) -> None:
        self.agent = agent
        self.asker = asker
        self.screen = screen
        self.lines = lines
        self.cwd = cwd
        self.interactive = interactive
        self.quitting = quitting
        self.renderer = Renderer(None, screen, self._terminal_output)
        asker.renderer = self.renderer
        agent.listeners.append(self.renderer)
        self.session_id: str | None = None
        self.untouched: str | None = None  # the session chat started, until a prompt goes to it
        self.capabilities: dict[str, Any] = {}
        self.auth_methods: list[str] = []  # the ids initialize offered (authMethods)
        self.turn: Pending | None = None
        self.cancelled = False
        self._late_cancel: Greenlet | None = None

    # -- keys ----------------------------------------------------------------------------------
    def on_interrupt(self) -> None:
        """Ctrl-C: cancel the running turn; with none (or one already cancelled), quit."""
        if self.turn is not None and not self.turn.done and not self.cancelled:
            self.cancel_turn("^C cancelling the turn (Ctrl-C again quits)")
        else:
            self.quitting.set()

    def cancel_turn(self, said: str) -> None:
        assert self.session_id is not None
        self.cancelled = True
        self.agent.cancel(self.session_id)
        self.asker.withdraw_all()
        self.screen.line(click.style(said, fg="red"))
        self._late_cancel = gevent.spawn_later(
            STATUS_AFTER, self.screen.note, "chat: the agent has not ended the cancelled turn yet; Ctrl-C quits without waiting")

    # -- waiting -------------------------------------------------------------------------------
    def wait(self, pending: Pending, what: str) -> dict[str, Any]:
        """The agent's answer to `pending`; Quit on Ctrl-C, AgentGone if the agent stops first."""
        late = gevent.spawn_later(STATUS_AFTER, self.screen.note, f"chat: waiting for the agent to answer {what}; Ctrl-C quits")
        try:
            gevent.wait([pending.waitable, self.agent.eof, self.quitting], count=1)
        finally:
            late.kill()
        if self.quitting.is_set():
            raise Quit(INTERRUPTED, f"chat: quit (Ctrl-C) before the agent answered {what}")
        if not pending.done:
            raise AgentGone(gone_reason(self.agent))
        return pending.response(timeout=0)

    # -- the session ---------------------------------------------------------------------------
    def start(self, resume: str | None, command: str, authenticate: str | None = None) -> int | None:
        """Initialize, log in with `authenticate` (an authMethods id) if given, then a new session
        or the stored one `resume` names; an exit code if that fails."""
        try:
            info = self.wait(self.agent.request("initialize", self.agent.initialize_params()), "initialize").get("result")
        except AgentGone as exc:
            raise AgentGone(f"did not start a session: it {exc}") from None
        info = info if isinstance(info, dict) else {}
        capabilities = info.get("agentCapabilities")
        self.capabilities = capabilities if isinstance(capabilities, dict) else {}
        self.auth_methods = auth_method_ids(info)
        if authenticate is not None and not log_in(self.agent, self.screen, self.wait, self.auth_methods, authenticate):
            return 1
        if resume is not None:
            if not self.open_stored(resume):
                return 1
        elif not self.open_new():
            return 1
        gevent.sleep(0.05)  # the commands update follows the session's answer; give it a moment
        given = info.get("agentInfo")
        agent_info = given if isinstance(given, dict) else {}
        self.screen.line(f"chatting with {harmless(agent_info.get('title') or agent_info.get('name') or command)}"
                         f" (session {harmless(self.session_id)}); Ctrl-C cancels a turn, Ctrl-D quits")
        if self.renderer.commands:
            self.screen.line("agent commands: " + " ".join("/" + c for c in self.renderer.commands))
        self.screen.line(click.style("chat commands: " + " ".join(CHAT_COMMANDS), dim=True))
        return None

    def open_new(self) -> bool:
        pending = self.agent.request("session/new", {"cwd": self.cwd, "mcpServers": []})
        try:
            opened = self._opening(pending, None, None, "session/new")
        except AgentGone as exc:
            raise AgentGone(f"did not start a session: it {exc}") from None
        if opened is None:
            self.screen.note(not_started(pending.response(timeout=0), self.auth_methods))
            return False
        self.session_id = self.untouched = opened
        return True

    def discard_untouched(self) -> None:
        """Delete the session chat started if no prompt went to it (chat_history.discard_session)."""
        session_id, self.untouched = self.untouched, None
        if session_id is not None:
            discard_session(self.agent, self.capabilities, session_id, self.screen)

    def open_stored(self, session_id: str) -> bool:
        """Continue a stored session (session/load, showing its history compactly; else session/resume)."""
        if self.capabilities.get("loadSession") is True:
            method = "session/load"
        elif isinstance((self.capabilities.get("sessionCapabilities") or {}).get("resume"), dict):
            method = "session/resume"
        else:
            self.screen.note("chat: this agent cannot continue a stored session (it offers neither loadSession nor session/resume)")
            return False
        pending = self.agent.request(method, {"sessionId": session_id, "cwd": self.cwd, "mcpServers": []})
        history = History() if method == "session/load" else None
        if self._opening(pending, session_id, history, f"{method} {harmless(session_id)}") is None:
            self.screen.note(f"chat: the agent could not continue session {harmless(session_id)}: "
                             f"{error_text(pending.response(timeout=0).get('error'))}")
            return False
        if self.untouched != session_id:
            self.discard_untouched()  # left for another before any prompt: as if chat had ended
        self.session_id = session_id
        if history is None:
            self.screen.line(click.style(f"[resumed {harmless(session_id)}: this agent resumes without showing the history]", fg="magenta"))
            return True
        self.screen.line(click.style(f"[history of {harmless(session_id)}: {history.turns} turns]", fg="magenta"))
        for line in history.lines():
            self.screen.line(line)
        return True

    def _opening(self, pending: Pending, session_id: str | None, history: History | None, what: str) -> str | None:
        """Wait for a session to open, the renderer standing aside meanwhile (chat_history.SessionSwitch)."""
        switch = SessionSwitch(pending, self.renderer, session_id, history)
        listeners = self.agent.listeners
        listeners[listeners.index(self.renderer)] = switch
        try:
            self.wait(pending, what)
        finally:
            listeners[listeners.index(switch)] = self.renderer
        return switch.finish()

    def list_sessions(self) -> None:
        """`/sessions`: the agent's stored sessions (session/list), most recent first."""
        if not isinstance((self.capabilities.get("sessionCapabilities") or {}).get("list"), dict):
            self.screen.note("chat: this agent does not list its sessions (it offers no session/list)")
            return
        found: list[Any] = []
        cursor: Any = None
        while len(found) <= MAX_LISTED:
            message = self.wait(self.agent.request("session/list", {"cursor": cursor} if cursor else {}), "session/list")
            if "error" in message:
                self.screen.note(f"chat: the agent could not list its sessions: {error_text(message['error'])}")
                return
            given = message.get("result")
            result = given if isinstance(given, dict) else {}
            page = result.get("sessions")
            page = page if isinstance(page, list) else []
            found.extend(page)
            cursor = result.get("nextCursor")
            if not page or not isinstance(cursor, str):
                break
        shown = session_lines(found[:MAX_LISTED], self.session_id, self.cwd)
        for line in shown or [click.style("(no stored sessions)", dim=True)]:
            self.screen.line(line)
        if len(found) > MAX_LISTED:
            self.screen.line(click.style(f"(only the {MAX_LISTED} most recent are shown)", dim=True))
        if shown:
            self.screen.line(click.style("/load ID continues one (* marks this one)", dim=True))

    # -- the prompt ----------------------------------------------------------------------------
    def talk(self) -> int:
        """Read prompts until Ctrl-D (or the end of input); the exit code."""
        while True:
            self.screen.text("> ")
            line = self.lines.next_line()
            gevent.wait([line, self.agent.eof, self.quitting], count=1)
            if self.quitting.is_set():
                raise Quit(INTERRUPTED, "chat: quit (Ctrl-C)")
            if not line.ready():  # the agent left while the person was typing
                raise AgentGone(gone_reason(self.agent))
            typed = self.lines.taken()
            self.screen.mid_line = False
            if not typed:  # Ctrl-D
                self.screen.line("")
                return 0
            text = typed.rstrip("\n")
            if not text.strip() or self.chat_command(text.strip()):
                continue
            if not self.run_turn(text):
                return 0

    def chat_command(self, text: str) -> bool:
        """Run `text` if it is one of chat's own commands (True), else leave it to the agent."""
        name, _, argument = text.partition(" ")
        if name == "/sessions" and not argument:
            self.list_sessions()
        elif name == "/load":
            if argument.strip():
                self.open_stored(argument.strip())
            else:
                self.screen.note("chat: /load needs a session id (/sessions lists them)")
        else:
            return False
        return True

    def run_turn(self, text: str) -> bool:
        """One prompt and its turn, shown as it streams; False when the person quit during it (Ctrl-D)."""
        assert self.session_id is not None
        self.untouched = None
        pending = self.agent.prompt(self.session_id, text)
        self.turn, self.cancelled, leaving = pending, False, False
        # Shows the turn has started (and that Ctrl-C now cancels it) before any reply arrives.
        self.screen.text(click.style("… ", dim=True))
        self.screen.start_spinner()
        silent = gevent.spawn_later(SILENT_TURN_AFTER, self._silent_turn, len(self.agent.records))
        try:
            while not pending.done:
                waits = [pending.waitable, self.agent.eof, self.quitting]
                if self.interactive and not leaving:
                    self.lines.next_line()  # read during the turn too, so Ctrl-D is seen at once
                    waits.append(self.lines.ended)
                gevent.wait(waits, count=1)
                if self.quitting.is_set():
                    raise Quit(INTERRUPTED, "chat: quit (Ctrl-C) without waiting for the turn to end")
                if pending.done:
                    break
                if self.agent.eof.is_set():
                    raise AgentGone(gone_reason(self.agent))
                if self.lines.ended.is_set() and not leaving:  # Ctrl-D during the turn
                    leaving = True
                    if not self.cancelled:
                        self.cancel_turn("^D cancelling the turn, then quitting (Ctrl-C quits at once)")
        finally:
            silent.kill()
            if self._late_cancel is not None:
                self._late_cancel.kill()
            self.turn = None
        message = pending.response(timeout=0)
        if "error" in message:
            error = message["error"] if isinstance(message["error"], dict) else {}
            self.screen.line(click.style(harmless(f"[error {error.get('code')}: {error.get('message')}]"), fg="red"))
        else:
            result = message.get("result")
            self.renderer.end_turn(str(result.get("stopReason") if isinstance(result, dict) else None))
        return not leaving

    def _silent_turn(self, heard: int) -> None:
        if not any(record.direction == "in" for record in self.agent.records[heard:]):
            self.screen.note(f"chat: nothing from the agent for {SILENT_TURN_AFTER:.0f} s; Ctrl-C cancels the turn, a second Ctrl-C quits")

    def _terminal_output(self, terminal_id: str) -> str | None:
        hosted = self.agent.terminal_host.terminals.get(terminal_id)
        return hosted.text()[0] if hosted is not None else None
