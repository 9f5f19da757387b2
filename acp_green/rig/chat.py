"""`acp-green chat`: a small interactive terminal client for any stdio ACP agent.

Type a prompt, watch the reply stream in; Ctrl-C cancels the running turn (session/cancel),
Ctrl-D quits. Lines starting with `/` go to the agent unchanged: they are its slash commands.
The agent runs in its own session, so the terminal's SIGINT reaches only
this client, which turns it into a cancel instead of killing the agent.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import click
import gevent

from .client import AgentProcess, ClientPolicy, Pending

__all__ = ["ChatOptions", "run_chat", "default_command"]


def default_command() -> list[str]:
    """acp-green's own demo agent."""
    return [sys.executable, "-m", "acp_green", "serve", "--ephemeral"]


@dataclass(slots=True)
class ChatOptions:
    """What to launch and how to answer its requests."""

    command: list[str] = field(default_factory=default_command)
    cwd: str = field(default_factory=os.getcwd)
    allow: bool = True  # answer permission requests with "allow"
    use_disk: bool = True  # serve fs/read_text_file from real files


class Renderer:
    """Turns session/update notifications into terminal output."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.commands: list[str] = []
        self.mid_line = False

    def __call__(self, message: dict[str, Any]) -> None:
        if message.get("method") == "session/request_permission":
            title = ((message.get("params") or {}).get("toolCall") or {}).get("title", "a tool call")
            self._line(click.style(f"[permission] {title}: answered automatically", fg="yellow"))
            return
        if message.get("method") != "session/update":
            return
        params = message.get("params") or {}
        if params.get("sessionId") != self.session_id:
            return
        update = params.get("update") or {}
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            self._text(_content_text(update.get("content")))
        elif kind == "agent_thought_chunk":
            self._text(click.style(_content_text(update.get("content")), dim=True))
        elif kind == "tool_call":
            self._line(click.style(f"[tool] {update.get('title', update.get('toolCallId'))} ({update.get('status', 'pending')})", fg="cyan"))
        elif kind == "tool_call_update" and update.get("status"):
            self._line(click.style(f"[tool] {update.get('toolCallId')}: {update['status']}", fg="cyan"))
        elif kind == "plan":
            entries = update.get("entries") or []
            self._line(click.style("[plan] " + "; ".join(f"{e.get('content')} ({e.get('status')})" for e in entries), fg="magenta"))
        elif kind == "available_commands_update":
            self.commands = [c.get("name", "") for c in update.get("availableCommands") or []]
        elif kind == "current_mode_update":
            self._line(click.style(f"[mode] {update.get('currentModeId')}", fg="magenta"))

    def _text(self, text: str) -> None:
        click.echo(text, nl=False)
        self.mid_line = not text.endswith("\n")

    def _line(self, text: str) -> None:
        if self.mid_line:
            click.echo()
        click.echo(text)
        self.mid_line = False

    def end_turn(self, outcome: str) -> None:
        self._line(click.style(f"[{outcome}]", fg="green" if outcome == "end_turn" else "red"))


def _content_text(content: Any) -> str:
    if isinstance(content, dict):
        if content.get("type") == "text":
            return str(content.get("text", ""))
        return f"[{content.get('type')}]"
    return ""


def _read_line() -> str:
    """One line from the terminal without blocking the hub (a thread reads; the tty stays blocking)."""
    return gevent.get_hub().threadpool.spawn(sys.stdin.readline).get()  # ok: a thread reads; the tty stays blocking (a non-blocking flag would reach the terminal)


def run_chat(options: ChatOptions) -> int:
    """The interactive loop; returns the exit code."""
    policy = ClientPolicy(permission="allow" if options.allow else "reject", use_disk=options.use_disk)
    agent = AgentProcess(options.command, policy)
    try:
        init = agent.initialize()
        info = init.get("agentInfo") or {}
        session = agent.call("session/new", {"cwd": options.cwd, "mcpServers": []})
    except Exception as exc:
        click.echo(f"chat: the agent did not start a session: {exc}", err=True)
        click.echo(bytes(agent.stderr[-2000:]).decode("utf-8", "replace"), err=True)
        agent.close()
        return 1
    session_id = session["sessionId"]
    renderer = Renderer(session_id)
    agent.listeners.append(renderer)
    for message in agent.received():  # what arrived before the renderer listened
        if (message.get("params") or {}).get("update", {}).get("sessionUpdate") == "available_commands_update":
            renderer(message)
    current: list[Pending] = []

    def on_interrupt() -> None:
        if current and not current[0].done:
            agent.cancel(session_id)
            renderer._line(click.style("^C cancelling the turn", fg="red"))
        else:
            renderer._line("(Ctrl-D quits)")
            click.echo("> ", nl=False)

    handler = gevent.signal_handler(signal.SIGINT, on_interrupt)
    gevent.sleep(0.05)  # the commands update follows the session/new response; give it a moment
    click.echo(f"chatting with {info.get('title') or info.get('name') or ' '.join(options.command)}"
               f" (session {session_id}); Ctrl-C cancels a turn, Ctrl-D quits")
    if renderer.commands:
        click.echo("agent commands: " + " ".join("/" + c for c in renderer.commands))
    try:
        while True:
            click.echo("> ", nl=False)
            line = _read_line()
            if not line:  # Ctrl-D
                click.echo()
                break
            text = line.rstrip("\n")
            if not text.strip():
                continue
            pending = agent.prompt(session_id, text)
            current[:] = [pending]
            # Shows the turn has started (and that Ctrl-C now cancels it) before any reply arrives.
            renderer._text(click.style("… ", dim=True))
            while True:
                try:
                    message = pending.response(timeout=1.0)
                    break
                except gevent.Timeout:
                    if agent.eof.is_set():
                        renderer._line(click.style("[the agent closed its output]", fg="red"))
                        return 1
            current.clear()
            if "error" in message:
                renderer._line(click.style(f"[error {message['error'].get('code')}: {message['error'].get('message')}]", fg="red"))
            else:
                renderer.end_turn(str((message.get("result") or {}).get("stopReason")))
    finally:
        handler.cancel()
        agent.close()
    return 0


def main(command: Sequence[str], allow: bool) -> int:
    """Entry for the CLI: the default agent when no command is given."""
    options = ChatOptions(command=list(command) or default_command(), allow=allow)
    return run_chat(options)
