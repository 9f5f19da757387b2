"""`acp-green chat`: a small interactive terminal client for any stdio ACP agent.

Type a prompt, watch the reply stream in; Ctrl-C cancels the running turn (session/cancel),
Ctrl-D quits. Lines starting with `/` go to the agent unchanged: they are its slash commands.
The agent runs in its own session, so the terminal's SIGINT reaches only this client, which
turns it into a cancel instead of killing the agent. Chat is a real client: it reads and writes
the files the agent names, runs the commands it asks for and fills its forms, asking the person
(chat_ask.py) before each but a read inside the session's cwd. The agent may be hostile: only
regular files are served, reads are bounded (chat_files.py) and its text is shown harmless
(chat_text.py). Whatever goes wrong with the agent is one line on stderr and exit 1.
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
from gevent import subprocess

from ...errors import NOT_APPROVED
from . import chat_files
from .chat_ask import Approval, Asker, LineSource
from .chat_render import Renderer, Screen, diff_lines
from .chat_text import harmless
from .client import AcpClient, AgentProcess, ClientPolicy, Pending

__all__ = ["ChatOptions", "run_chat", "default_command", "AgentGone"]

#: What chat tells the agent it can do: files, terminals and forms, all served for real.
CAPABILITIES = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True, "elicitation": {"form": {}}}


def default_command() -> list[str]:
    """acp-green's own demo agent."""
    return [sys.executable, "-m", "acp_green", "serve", "--ephemeral"]


@dataclass(slots=True)
class ChatOptions:
    """What to launch and who answers its questions."""

    command: list[str] = field(default_factory=default_command)
    cwd: str = field(default_factory=os.getcwd)
    approve: str = "ask"  # "ask" (the person, when stdin is a terminal), "yes" or "deny"


class AgentGone(Exception):
    """The agent stopped talking (exited or closed its output) while chat waited for it."""


def approval_for(approve: str, interactive: bool) -> Approval:
    """Who answers: --yes and --deny decide alone; otherwise the person, if there is a terminal to ask in."""
    if approve == "yes":
        return Approval.YES
    if approve == "deny":
        return Approval.DENY
    return Approval.ASK if interactive else Approval.NO_TERMINAL


def serve_files(client: AcpClient, asker: Asker, screen: Screen, cwd: str) -> None:
    """Answer the agent's file requests from the real files (chat_files.py), asking first where the person must decide.

    A read inside the session's directory `cwd` is answered at once; a read outside it (symlinks
    resolved: a link in cwd to ~/.ssh is outside) and every write are asked (Asker.confirm), so
    --deny, and a pipe without --yes, refuse them: -32001 to the agent and a line to the person.
    Paths that are not regular files are refused by chat_files whatever the answer.
    """

    def read(_client: AcpClient, request: dict[str, Any]) -> None:
        params = _params(request)
        try:
            path = chat_files.absolute_path(params)
        except chat_files.FileRequestRefused as exc:
            client.respond_error(request["id"], exc.to_error())
            return

        def answer(allowed: bool = True) -> None:
            if not allowed:
                client.respond_error(request["id"], _not_approved(f"reading {path}", asker, path))
                return
            try:
                client.respond(request["id"], {"content": chat_files.read_text(params)})
            except chat_files.FileRequestRefused as exc:
                if exc.code != chat_files.RESOURCE_NOT_FOUND:  # a missing file is the agent's to report
                    screen.line(click.style(f"[read refused] {harmless(exc)}", fg="red"))
                client.respond_error(request["id"], exc.to_error())

        if chat_files.is_inside(path, cwd):
            answer()
        else:
            asker.confirm(request, f"[file] read {harmless(path)}{_resolved_note(path)}, outside {harmless(cwd)}", [], answer)

    def write(_client: AcpClient, request: dict[str, Any]) -> None:
        try:
            planned = chat_files.plan_write(_params(request))
        except chat_files.FileRequestRefused as exc:
            screen.line(click.style(f"[write refused] {harmless(exc)}", fg="red"))
            client.respond_error(request["id"], exc.to_error())
            return
        diff = diff_lines(planned.path, planned.old_text, planned.new_text)
        if planned.unshown is not None:  # the diff shows a new file, but one is there and will be replaced
            diff.insert(0, click.style(f"replaces the whole file, whose text is not shown: {harmless(planned.unshown)}", fg="red"))
        where = "" if chat_files.is_inside(planned.path, cwd) else f", outside {harmless(cwd)}"

        def answer(allowed: bool) -> None:
            if not allowed:
                client.respond_error(request["id"], _not_approved(f"writing {planned.path}", asker, planned.path))
                return
            try:
                chat_files.apply_write(planned)
            except chat_files.FileRequestRefused as exc:
                screen.line(click.style(f"[write refused] {harmless(exc)}", fg="red"))
                client.respond_error(request["id"], exc.to_error())
                return
            client.respond(request["id"], {})
            screen.line(click.style(f"[wrote] {harmless(planned.path)}", fg="green"))
            if asker.approval is not Approval.ASK:  # the person was shown the diff with the question
                for line in diff:
                    screen.line("    " + line)

        asker.confirm(request, f"[file] write {harmless(planned.path)}{_resolved_note(planned.path)}{where}", diff, answer)

    client.policy.handlers["fs/read_text_file"] = read
    client.policy.handlers["fs/write_text_file"] = write


def _params(request: dict[str, Any]) -> dict[str, Any]:
    """The request's params when they are an object; anything else counts as none (so 'path' is missing)."""
    params = request.get("params")
    return params if isinstance(params, dict) else {}


def _resolved_note(path: str) -> str:
    real = chat_files.real_path(path)
    return "" if real == os.path.normpath(path) else f" (really {harmless(real)})"


def _not_approved(what: str, asker: Asker, path: str) -> dict[str, Any]:
    """The error the agent gets for a file request the person (or --deny, or nobody) did not approve."""
    why = {Approval.DENY: "chat runs with --deny", Approval.NO_TERMINAL: "nobody can be asked (stdin is not a terminal) and chat runs without --yes"}
    reason = why.get(asker.approval, "the user refused")
    return {"code": NOT_APPROVED, "message": f"The user did not approve {what}: {reason}", "data": {"path": path}}


def wait_for(agent: AgentProcess, pending: Pending) -> dict[str, Any]:
    """The agent's response to `pending`; AgentGone if the agent stops talking first."""
    gevent.wait([pending.waitable, agent.eof], count=1)
    if not pending.done:
        raise AgentGone(gone_reason(agent))
    return pending.response(timeout=0)


def gone_reason(agent: AgentProcess) -> str:
    """Why the agent is gone, in a few words: its exit status and the last line of its stderr."""
    try:
        code = agent.proc.wait(timeout=2)
        said = f"exited with code {code}" if code >= 0 else f"was killed by {signal.Signals(-code).name}"
    except subprocess.TimeoutExpired:  # still running with its output closed
        said = "closed its output"
    last = agent.stderr_text(timeout=2)[-2000:].strip().splitlines()
    return said + (f" (its stderr ends: {harmless(last[-1][:300])})" if last else "")


def run_chat(options: ChatOptions, stdin: Any = None) -> int:
    """The interactive loop; returns the exit code."""
    stdin = stdin or sys.stdin
    interactive = stdin.isatty()
    screen = Screen(spinner=sys.stderr.isatty())
    lines = LineSource(stdin.readline)
    try:
        agent = AgentProcess(options.command, ClientPolicy(capabilities=CAPABILITIES))
    except OSError as exc:
        click.echo(f"chat: cannot start {options.command[0]!r}: {exc.strerror or exc}", err=True)
        return 1
    asker = Asker(agent, screen, lines, approval_for(options.approve, interactive), interactive)
    asker.install()
    serve_files(agent, asker, screen, options.cwd)
    try:
        return _converse(agent, asker, screen, lines, options)
    except AgentGone as exc:
        screen.note(f"chat: the agent {exc}")
        return 1
    except OSError:  # writing to an agent that has gone
        screen.note(f"chat: the agent {gone_reason(agent)}")
        return 1
    finally:
        screen.stop_spinner()
        agent.close()


def _converse(agent: AgentProcess, asker: Asker, screen: Screen, lines: LineSource, options: ChatOptions) -> int:
    try:
        info = wait_for(agent, agent.request("initialize", agent.initialize_params())).get("result") or {}
        new = wait_for(agent, agent.request("session/new", {"cwd": options.cwd, "mcpServers": []}))
    except AgentGone as exc:
        raise AgentGone(f"did not start a session: it {exc}") from None
    if "error" in new or not isinstance((new.get("result") or {}).get("sessionId"), str):
        screen.note(f"chat: the agent did not start a session: {new.get('error') or new.get('result')}")
        return 1
    session_id = new["result"]["sessionId"]
    renderer = Renderer(session_id, screen, lambda tid: _terminal_output(agent, tid))
    asker.renderer = renderer
    agent.listeners.append(renderer)
    for message in agent.received():  # what arrived before the renderer listened
        if (message.get("params") or {}).get("update", {}).get("sessionUpdate") == "available_commands_update":
            renderer(message)
    current: list[Pending] = []

    def on_interrupt() -> None:
        if current and not current[0].done:
            agent.cancel(session_id)
            asker.withdraw_all()
            screen.line(click.style("^C cancelling the turn", fg="red"))
        else:
            screen.line("(Ctrl-D quits)")
            screen.text("> ")

    handler = gevent.signal_handler(signal.SIGINT, on_interrupt)
    gevent.sleep(0.05)  # the commands update follows the session/new response; give it a moment
    agent_info = info.get("agentInfo") or {}
    screen.line(f"chatting with {harmless(agent_info.get('title') or agent_info.get('name') or ' '.join(options.command))}"
                f" (session {harmless(session_id)}); Ctrl-C cancels a turn, Ctrl-D quits")
    if renderer.commands:
        screen.line("agent commands: " + " ".join("/" + c for c in renderer.commands))
    try:
        while True:
            screen.text("> ")
            gevent.wait([lines.next_line(), agent.eof], count=1)
            if not lines.next_line().ready():  # the agent left while the person was typing
                raise AgentGone(gone_reason(agent))
            line = lines.taken()
            screen.mid_line = False
            if not line:  # Ctrl-D
                screen.line("")
                return 0
            text = line.rstrip("\n")
            if not text.strip():
                continue
            pending = agent.prompt(session_id, text)
            current[:] = [pending]
            # Shows the turn has started (and that Ctrl-C now cancels it) before any reply arrives.
            screen.text(click.style("… ", dim=True))
            screen.start_spinner()
            message = wait_for(agent, pending)
            current.clear()
            if "error" in message:
                error = message["error"] if isinstance(message["error"], dict) else {}
                screen.line(click.style(harmless(f"[error {error.get('code')}: {error.get('message')}]"), fg="red"))
            else:
                renderer.end_turn(str((message.get("result") or {}).get("stopReason")))
    finally:
        handler.cancel()


def _terminal_output(client: AcpClient, terminal_id: str) -> str | None:
    hosted = client.terminal_host.terminals.get(terminal_id)
    return hosted.text()[0] if hosted is not None else None


def main(command: Sequence[str], approve: str) -> int:
    """Entry for the CLI: the default agent when no command is given."""
    return run_chat(ChatOptions(command=list(command) or default_command(), approve=approve))
