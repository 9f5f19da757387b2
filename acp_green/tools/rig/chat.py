"""`acp-green chat`: a small interactive terminal client for any stdio ACP agent.

Type a prompt, watch the reply stream in; the keys, chat's own commands (/sessions, /load ID)
and the waits are chat_loop.py's. Other lines starting with `/` go to the agent unchanged: they
are its slash commands. The agent runs in its own session, so the terminal's SIGINT reaches only
this client, which turns it into a cancel instead of killing the agent; when chat ends, the agent
gets EOF and CLOSE_GRACE seconds before it is killed. The demo agent keeps its sessions where
`serve` does unless --ephemeral. Chat is a real client: it reads and writes the files the agent
names, runs the commands it asks for and fills its forms, asking the person (chat_ask.py) before
each but a read inside the session's cwd. The agent may be hostile: only regular files are
served, reads are bounded (chat_files.py), its text is shown harmless (chat_text.py) and only the
last KEPT_RECORDS bytes of what passed are kept. A session chat started and no prompt went to is
deleted when chat ends (or leaves it for another with /load): launching and quitting stores nothing.
Whatever goes wrong with the agent is one line on stderr and exit 1.
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
from gevent.event import Event

from ...errors import NOT_APPROVED
from ...store.statedir import default_state_dir
from . import chat_files
from .chat_ask import Approval, Asker, FdLines, LineSource
from .chat_loop import AgentGone, Conversation, Quit, gone_reason
from .chat_render import Screen, diff_lines
from .chat_text import harmless
from .client import AcpClient, AgentProcess, ClientPolicy
from .remote_link import is_agent_url, shown_command

__all__ = ["ChatOptions", "run_chat", "default_command", "demo_command", "AgentGone"]

#: What chat tells the agent it can do: files, terminals and forms, all served for real.
CAPABILITIES = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True, "elicitation": {"form": {}}}


#: Seconds the agent has to exit after chat closes its input, before chat kills it.
CLOSE_GRACE = 2.0
#: What chat keeps of the lines that passed (it shows each as it comes): the last MiB of them,
#: so an agent that floods costs chat no more memory than one that does not.
KEPT_RECORDS = 1 << 20


def default_command() -> list[str]:
    """acp-green's own demo agent, keeping nothing on disk."""
    return [sys.executable, "-m", "acp_green", "serve", "--ephemeral"]


@dataclass(slots=True)
class ChatOptions:
    """What to launch and who answers its questions."""

    command: list[str] = field(default_factory=default_command)
    cwd: str = field(default_factory=os.getcwd)
    approve: str = "ask"  # "ask" (the person, when stdin is a terminal), "yes" or "deny"
    resume: str | None = None  # a stored session to continue instead of starting a new one
    authenticate: str | None = None  # an authMethods id to log in with before the session (`--authenticate`)


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


def stop_agent(agent: AgentProcess, grace: float = CLOSE_GRACE) -> None:
    """End the agent promptly: EOF, `grace` seconds to exit on its own, then SIGKILL to its process
    group (a remote agent: its connection ended, then dropped)."""
    agent.close_input()
    try:
        agent.proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        agent.kill()  # it runs in a session (and group) of its own
    agent.close()  # reaps it at once now, and what it left in its group


def run_chat(options: ChatOptions, stdin: Any = None) -> int:
    """The interactive loop; returns the exit code."""
    stdin = stdin or sys.stdin
    interactive = stdin.isatty()
    screen = Screen(spinner=sys.stderr.isatty())
    lines = LineSource(FdLines(stdin.fileno()))
    quitting = Event()
    conversation: Conversation | None = None

    def on_interrupt() -> None:
        if conversation is not None:
            conversation.on_interrupt()
        else:
            quitting.set()

    handler = gevent.signal_handler(signal.SIGINT, on_interrupt)  # from the start: Ctrl-C never raises KeyboardInterrupt
    try:
        try:
            agent = AgentProcess(options.command, ClientPolicy(capabilities=CAPABILITIES))
        except OSError as exc:
            what = "reach" if is_agent_url(options.command[0]) else "start"
            click.echo(f"chat: cannot {what} {harmless(shown_command(options.command)[0])!r}: {harmless(exc.strerror or exc)}", err=True)
            return 1
        except ValueError as exc:  # words after a URL that are not the link's options
            click.echo(f"chat: {harmless(exc)}", err=True)
            return 2
        agent.client.keep_at_most(KEPT_RECORDS)
        try:
            asker = Asker(agent.client, screen, lines, approval_for(options.approve, interactive), interactive)
            asker.install()
            serve_files(agent.client, asker, screen, options.cwd)
            conversation = Conversation(agent, asker, screen, lines, options.cwd, interactive, quitting)
            failed = conversation.start(options.resume, agent.shown_command, options.authenticate)
            if failed is not None:
                return failed
            code = conversation.talk()
            conversation.discard_untouched()
            return code
        except Quit as exc:
            screen.note(exc.said)
            if conversation is not None:
                conversation.discard_untouched()
            return exc.code
        except AgentGone as exc:
            screen.note(f"chat: the agent {exc}")
            return 1
        except OSError:  # writing to an agent that has gone
            screen.note(f"chat: the agent {gone_reason(agent)}")
            return 1
        finally:
            screen.stop_spinner()
            stop_agent(agent)
    finally:
        handler.cancel()


def demo_command(ephemeral: bool, state_dir: str | None) -> list[str]:
    """The demo agent, keeping its sessions where `serve` does (or `state_dir`), or in memory (`ephemeral`).

    Other agents may serve from the same directory meanwhile: each owns the sessions it has open.
    """
    if ephemeral:
        return default_command()
    resolved = os.path.abspath(os.path.expanduser(state_dir or default_state_dir()))
    return [sys.executable, "-m", "acp_green", "serve", *(["--state-dir", resolved] if state_dir is not None else [])]


def main(command: Sequence[str], approve: str, *, resume: str | None = None, ephemeral: bool = False,
         state_dir: str | None = None, authenticate: str | None = None) -> int:
    """Entry for the CLI: the demo agent when no command is given."""
    launched = list(command) or demo_command(ephemeral, state_dir)
    return run_chat(ChatOptions(command=launched, approve=approve, resume=resume, authenticate=authenticate))
