"""Chat's answers to the agent's questions for the person: permissions, commands to run, forms,
and chat's own questions about the agent's file requests (`Asker.confirm`).

How a question is answered is decided once (`Approval`): in a terminal the person is asked and
types the answer as the next line; `--yes` approves, `--deny` rejects, and without a terminal and
without `--yes` nobody can be asked, so chat rejects and says how to approve. Forms are filled only
in a terminal (whatever `--yes` or `--deny` say: they approve, they do not answer); otherwise they
are declined. One question is asked at a time; each runs in its
own greenlet, so the client keeps reading the agent while the person thinks. A question the turn
no longer needs (Ctrl-C, or `$/cancel_request` from the agent) is withdrawn and answered as ACP says.
"""

from __future__ import annotations

import codecs
import enum
import os
import shlex
from collections.abc import Callable, Mapping
from typing import Any

import click
import gevent
from gevent.event import AsyncResult, Event
from gevent.greenlet import Greenlet
from gevent.lock import Semaphore

from ... import errors
from ...rpc.wire import IdKey, id_key, is_valid_id
from .chat_answers import Choice, Invalid, describe_choices, field_value, permission_choices, pick
from .chat_render import Renderer, Screen, content_lines
from .chat_text import harmless
from .client import AcpClient

REQUEST_CANCELLED = {"code": errors.REQUEST_CANCELLED, "message": "Request cancelled"}
NOT_APPROVED = errors.NOT_APPROVED  # the person (or chat for them) said no
FORM_ACTIONS = [Choice("fill it in", ("f", "fill", "y", "yes"), "accept"), Choice("decline", ("d", "n", "no"), "decline"),
                Choice("cancel", ("c",), "cancel")]


class Approval(enum.Enum):
    """Who answers the agent's questions."""

    ASK = "ask"  # the person, in the terminal
    YES = "yes"  # --yes: approve everything
    DENY = "deny"  # --deny: reject everything
    NO_TERMINAL = "no-terminal"  # nobody to ask: reject, and say how to approve


class LineSource:
    """Lines typed on stdin, read by a thread so the hub keeps running (the tty stays blocking).

    One read is outstanding at a time; a reader that stops waiting (a withdrawn question) leaves
    it for the next one, so no typed line is lost between a question and the prompt.
    """

    def __init__(self, readline: Callable[[], str]) -> None:
        self._readline = readline
        self._outstanding: AsyncResult | None = None
        self.ended = Event()  # a read returned '': end of input (Ctrl-D in a terminal), whoever took it

    def next_line(self) -> AsyncResult:
        """The pending read (started if none is): wait on it, then call `taken()`."""
        if self._outstanding is None:
            self._outstanding = gevent.get_hub().threadpool.spawn(self._readline)  # ok: a thread reads the tty, which stays blocking
            self._outstanding.rawlink(self._note_end)
        return self._outstanding

    def _note_end(self, result: AsyncResult) -> None:
        if result.successful() and not result.value:
            self.ended.set()

    def taken(self) -> str:
        """The line the pending read returned ('' at end of input); the next read starts afresh."""
        assert self._outstanding is not None and self._outstanding.ready()
        line, self._outstanding = self._outstanding.get(), None
        return line

    def read(self) -> str:
        self.next_line().wait()
        return self.taken()


class FdLines:
    """readline on the descriptor `fd`: a line with its newline; '' at end of input (or a read error) and ever after.

    Unlike a buffered file's readline it holds no lock of the interpreter's: chat may exit while the
    reading thread waits for the person (Ctrl-C at the prompt), and a buffered file's lock held
    by that thread would stop the interpreter's exit.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._buffered = ""
        self._ended = False

    def __call__(self) -> str:
        while "\n" not in self._buffered and not self._ended:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # the terminal went away: as good as the end of input
                chunk = b""
            self._buffered += self._decoder.decode(chunk, final=not chunk)
            self._ended = not chunk
        line, newline, self._buffered = self._buffered.partition("\n")
        return line + newline


class Asker:
    """Answers session/request_permission, terminal/create and elicitation/create for one chat."""

    def __init__(self, client: AcpClient, screen: Screen, lines: LineSource, approval: Approval, interactive: bool) -> None:
        self.client = client
        self.screen = screen
        self.lines = lines
        self.approval = approval
        self.interactive = interactive  # a person can be asked: forms are shown even with --yes or --deny
        self.renderer: Renderer | None = None  # set once the session exists: knows the tool calls
        self._one_at_a_time = Semaphore()
        self._open: dict[IdKey | None, tuple[Greenlet, dict[str, Any]]] = {}

    def install(self) -> None:
        """Take over the client's answers to the agent's questions."""
        handlers = self.client.policy.handlers
        for method in ("session/request_permission", "terminal/create", "elicitation/create"):
            handlers[method] = self._received
        self.client.policy.notification_handlers["$/cancel_request"] = self._cancel_request

    # -- the agent's requests ------------------------------------------------------------------
    def _received(self, client: AcpClient, request: dict[str, Any]) -> None:
        answer = {"session/request_permission": self.permission, "terminal/create": self.run_command,
                  "elicitation/create": self.form}[request["method"]]
        self._start(request, answer)

    def confirm(self, request: dict[str, Any], question: str, details: list[str], then: Callable[[bool], None]) -> None:
        """Ask `question` (allow or refuse) about the agent's `request`, then call `then(allowed)`.

        Asked like a permission (one question at a time, in its own greenlet, withdrawn on Ctrl-C or
        `$/cancel_request`, which answer the request -32800): --yes allows, --deny and no terminal refuse.
        """
        choices = [Choice("allow", ("y", "yes"), {"optionId": "allow", "kind": "allow_once"}),
                   Choice("refuse", ("n", "no"), {"optionId": "refuse", "kind": "reject_once"})]

        def answer(_request: dict[str, Any]) -> None:
            chosen = self._decide(question, choices, details)
            then(chosen is not None and chosen["optionId"] == "allow")

        self._start(request, answer)

    def _start(self, request: dict[str, Any], answer: Callable[[dict[str, Any]], None]) -> None:
        worker = Greenlet(self._answer_one, answer, request)
        self._open[id_key(request["id"])] = (worker, request)
        worker.start()

    def _answer_one(self, answer: Callable[[dict[str, Any]], None], request: dict[str, Any]) -> None:
        try:
            with self._one_at_a_time:
                answer(request)
        finally:
            self._open.pop(id_key(request["id"]), None)

    def _cancel_request(self, client: AcpClient, message: dict[str, Any]) -> None:
        params = message.get("params")
        request_id = params.get("requestId") if isinstance(params, dict) else None
        if is_valid_id(request_id):
            self._withdraw(id_key(request_id), REQUEST_CANCELLED)

    def withdraw_all(self) -> None:
        """The turn is cancelled: every open question is answered as cancelled (ACP requires it for permissions)."""
        for key in list(self._open):
            self._withdraw(key, None)

    def _withdraw(self, key: IdKey | None, error: dict[str, Any] | None) -> None:
        found = self._open.pop(key, None)
        if found is None:
            return
        worker, request = found
        worker.kill(block=True)
        self.screen.line(click.style("(question withdrawn)", dim=True))
        if error is not None:
            self.client.respond_error(request["id"], error)
        elif request["method"] == "session/request_permission":
            self.client.respond(request["id"], {"outcome": {"outcome": "cancelled"}})
        elif request["method"] == "elicitation/create":
            self.client.respond(request["id"], {"action": "cancel"})
        else:
            self.client.respond_error(request["id"], REQUEST_CANCELLED)

    # -- permission ----------------------------------------------------------------------------
    def permission(self, request: dict[str, Any]) -> None:
        params = request.get("params") or {}
        given = params.get("toolCall")
        tool_call = given if isinstance(given, dict) else {}
        choices = permission_choices(params.get("options") or [])
        title = self._tool_title(tool_call)
        chosen = self._decide(f"[permission] {title}", choices, self._tool_lines(tool_call))
        outcome = {"outcome": "selected", "optionId": chosen["optionId"]} if chosen else {"outcome": "cancelled"}
        self.client.respond(request["id"], {"outcome": outcome})

    def _decide(self, question: str, choices: list[Choice], details: list[str]) -> dict[str, Any] | None:
        """The option picked for a question (by the person, or by the approval rule); None: none fits."""
        allow = _first_of(choices, ("allow_once", "allow_always"))
        reject = _first_of(choices, ("reject_once", "reject_always"))
        if self.approval is Approval.YES:
            self.screen.line(click.style(f"{question}: approved (--yes)", fg="yellow"))
            return allow
        if self.approval is Approval.DENY:
            self.screen.line(click.style(f"{question}: rejected (--deny)", fg="yellow"))
            return reject
        if self.approval is Approval.NO_TERMINAL:
            self.screen.note(f"chat: rejected {question.split('] ', 1)[-1]!r}: stdin is not a terminal, so nobody can be "
                             "asked; run chat with --yes to approve the agent's requests")
            return reject
        self.screen.line(click.style(question, fg="yellow", bold=True))
        for line in details:
            self.screen.line("    " + line)
        found = self._ask(describe_choices(choices), lambda text: pick(text, choices))
        return found.value if isinstance(found, Choice) else reject

    def _ask(self, question: str, parse: Callable[[str], Any]) -> Any:
        """Ask until the typed line parses; None at end of input."""
        while True:
            self.screen.text(click.style(question, fg="yellow") + " ? ")
            line = self.lines.read()
            self.screen.mid_line = False  # the person's Enter ended the line
            if not line:
                self.screen.line(click.style("(no answer: end of input)", dim=True))
                return None
            value = parse(line)
            if value is not None and not isinstance(value, Invalid):
                return value
            self.screen.line(click.style(f"  please answer {value.reason if isinstance(value, Invalid) else 'with one of the choices'}",
                                         fg="red"))

    def _tool_title(self, tool_call: Mapping[str, Any]) -> str:
        known = self.renderer.tools.get(str(tool_call.get("toolCallId"))) if self.renderer else None
        return harmless(tool_call.get("title") or (known.title if known else None) or tool_call.get("toolCallId") or "a tool call")

    def _tool_lines(self, tool_call: Mapping[str, Any]) -> list[str]:
        """What the person should see: the kind, the files, the content (a diff as a unified diff)."""
        known = self.renderer.tools.get(str(tool_call.get("toolCallId"))) if self.renderer else None
        kind = tool_call.get("kind") or (known.kind if known else None)
        lines = [harmless(f"kind: {kind}")] if kind else []
        for location in tool_call.get("locations") or []:
            if isinstance(location, dict):
                lines.append(harmless(f"file: {location.get('path')}" + (f":{location['line']}" if location.get("line") else "")))
        given = tool_call.get("content")
        content = given if isinstance(given, list) else (known.content if known else [])
        terminal_text = self.renderer.terminal_text if self.renderer else (lambda _id: None)
        for item in content:
            lines.extend(content_lines(item, terminal_text))
        return lines

    # -- terminals -----------------------------------------------------------------------------
    def run_command(self, request: dict[str, Any]) -> None:
        params = request.get("params") or {}
        argv = [str(params.get("command", "")), *[str(a) for a in params.get("args") or []]]
        where = harmless(f" in {params['cwd']}") if params.get("cwd") else ""
        choices = [Choice("run it", ("y", "yes"), {"optionId": "run", "kind": "allow_once"}),
                   Choice("do not run it", ("n", "no"), {"optionId": "refuse", "kind": "reject_once"})]
        chosen = self._decide(f"[run] {harmless(shlex.join(argv))}{where}", choices, [])
        if chosen is not None and chosen["optionId"] == "run":
            self.client.terminal_host.handle(request, self.client.respond, self.client.respond_error)
        else:
            self.client.respond_error(request["id"], {"code": NOT_APPROVED, "message": "The user did not approve running the command"})

    # -- forms ---------------------------------------------------------------------------------
    def form(self, request: dict[str, Any]) -> None:
        params = request.get("params") or {}
        if params.get("mode") != "form":
            self.client.respond_error(request["id"], {"code": errors.INVALID_PARAMS, "message": f"Invalid params: chat shows forms only, not mode {params.get('mode')!r}"})
            return
        message = harmless(params.get("message", ""))
        if not self.interactive:
            self.screen.note(f"chat: declined the agent's form {message!r}: forms are filled only when stdin is a terminal")
            self.client.respond(request["id"], {"action": "decline"})
            return
        given = params.get("requestedSchema")
        schema = given if isinstance(given, dict) else {}
        self.screen.line(click.style(f"[form] {message}", fg="yellow", bold=True))
        action = self._ask(describe_choices(FORM_ACTIONS), lambda text: pick(text, FORM_ACTIONS))
        if not isinstance(action, Choice):
            self.client.respond(request["id"], {"action": "cancel"})
            return
        if action.value != "accept":
            self.client.respond(request["id"], {"action": action.value})
            return
        content = self._fill(schema)
        self.client.respond(request["id"], {"action": "accept", "content": content} if content is not None else {"action": "cancel"})

    def _fill(self, schema: Mapping[str, Any]) -> dict[str, Any] | None:
        """Each field in turn; an empty line leaves an optional field out; end of input cancels (None)."""
        required = set(schema.get("required") or [])
        content: dict[str, Any] = {}
        for name, field in (schema.get("properties") or {}).items():
            field = field if isinstance(field, dict) else {}
            label = harmless(field.get("title") or name) + ("" if name in required else " (optional)")
            if field.get("description"):
                self.screen.line(click.style(f"  {harmless(field['description'])}", dim=True))

            def parse(text: str, field: dict[str, Any] = field, optional: bool = name not in required) -> Any:
                if not text.strip() and optional:
                    return _LEFT_OUT
                return field_value(text, field)

            value = self._ask(f"  {label}", parse)
            if value is None:
                return None
            if value is not _LEFT_OUT:
                content[name] = value
        return content


_LEFT_OUT = Choice("left out", (), None)


def _first_of(choices: list[Choice], kinds: tuple[str, ...]) -> dict[str, Any] | None:
    for kind in kinds:
        for choice in choices:
            if choice.value.get("kind") == kind:
                return choice.value
    return None
