"""The built-in demonstration agent (the demo table of docs/SERVE.md), written only against the public agent API."""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any, TypeVar, overload

from . import content
from .rpc import wire
from .agent import Agent, Command, ExtensionCall, Mode, SelectOption, Turn, text_content
from .update_checks import PlanEntry
from .errors import CapabilityMissing, ClientError, McpUnavailable, RpcError
from .mcp.tools import Tool, ToolCall, ToolServer

ECHO_CHUNK = 24
CONTEXT_WINDOW = 128_000
TERMINAL_OUTPUT_LIMIT = 64 << 10
DIFF_LINE = "edited by the acp_green demo\n"
NOTICE_SEVERITIES = ("info", "warning", "error")
COMPACTION_SUMMARY = ("The demo compacted nothing: ", "this is its summary.")
ASK_FORM = {"properties": {"answer": {"type": "string", "title": "Answer"}}, "required": ["answer"]}

#: A command as registered: a method of a command group, called with the group, the turn and the arguments.
CommandHandler = Callable[[Any, Turn, str], str]
#: A command bound to the group object that runs it: called with the turn and the arguments.
BoundCommand = Callable[[Turn, str], str]
# A handler keeps its own type when registered: it stays an ordinary method of its group.
_Handler = TypeVar("_Handler", bound=CommandHandler)


def _seconds(args: str) -> float | None:
    """A command's SECONDS argument, or None when it is not a number (NaN included)."""
    try:
        seconds = float(args)
    except ValueError:
        return None
    return None if math.isnan(seconds) else seconds

class SlashCommands(Sequence[Command]):
    """The demo's slash commands: the one table both advertised and dispatched.

    It is a sequence of `Command`, so the agent's `commands` (what `available_commands_update`
    carries) is this very object: a name is advertised exactly when a handler is registered.
    Handlers are methods of command groups (`PacingCommands`...); `bind` ties each to the group
    object an agent holds, and the agent dispatches through what it returns.
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[Command, CommandHandler]] = {}

    def __call__(self, name: str, description: str, hint: str | None = None) -> Callable[[_Handler], _Handler]:
        """Register the decorated method as the handler of `/name`."""

        def register(handler: _Handler) -> _Handler:
            if name in self._entries:
                raise ValueError(f"the demo command /{name} is registered twice")
            self._entries[name] = (Command(name, description, hint), handler)
            return handler

        return register

    def handler(self, name: str) -> CommandHandler | None:
        """The handler of `/name`, or None when no such command is registered."""
        entry = self._entries.get(name)
        return entry[1] if entry else None

    def bind(self, *groups: object) -> dict[str, BoundCommand]:
        """Every command, by name, bound to the one of `groups` whose class defines its handler;
        ValueError naming a command none of them defines (it would be advertised and never run)."""
        bound: dict[str, BoundCommand] = {}
        for name, (_, handler) in self._entries.items():
            owner = next((group for group in groups if vars(type(group)).get(handler.__name__) is handler), None)
            if owner is None:
                raise ValueError(f"the demo command /{name} belongs to none of the command groups given")
            bound[name] = partial(handler, owner)
        return bound

    @overload
    def __getitem__(self, index: int) -> Command: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Command]: ...
    def __getitem__(self, index: int | slice) -> Command | Sequence[Command]:
        commands = [command for command, _ in self._entries.values()]
        return commands[index]

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Command]:
        return (command for command, _ in self._entries.values())


DEMO_COMMANDS = SlashCommands()


#: The largest SIZE `/stream N SIZE` builds: every chunk is one string in memory.
MAX_STREAM_CHUNK = 1 << 20


class PacingCommands:
    """The demo's command group that paces a turn: a stream of chunks, a cancellable sleep, a wait for the cancel."""

    @DEMO_COMMANDS("stream", "Stream N numbered chunks of SIZE bytes", "N [SIZE]")
    def stream(self, turn: Turn, args: str) -> str:
        parts = args.split()
        try:
            count = int(parts[0])
            size = int(parts[1]) if len(parts) > 1 else 64
        except (IndexError, ValueError):
            turn.say("usage: /stream N [SIZE]")
            return "end_turn"
        if size > MAX_STREAM_CHUNK:
            # Each chunk is one string: 300 MB of it stalled the hub and tripled RSS.
            turn.say(f"usage: /stream N [SIZE]: SIZE is at most {MAX_STREAM_CHUNK} bytes a chunk (asked for {size})")
            return "end_turn"
        for i in range(count):
            if turn.cancelled:
                return "cancelled"
            head = f"{i}:"
            turn.say(head + "." * (size - len(head)) if size > len(head) else head)
        return "end_turn"

    @DEMO_COMMANDS("sleep", "Wait SECONDS (cancellable)", "SECONDS")
    def sleep(self, turn: Turn, args: str) -> str:
        seconds = _seconds(args)
        if seconds is None:
            turn.say("usage: /sleep SECONDS")
            return "end_turn"
        return "end_turn" if turn.sleep(seconds) else "cancelled"

    @DEMO_COMMANDS("wait", "Wait until cancelled")
    def wait(self, turn: Turn, args: str) -> str:
        turn.wait_cancelled()
        return "cancelled"


class ClientCommands:
    """The demo's command group that acts through the client, each command as a tool call: files,
    MCP, terminals, a diff, a form."""

    @DEMO_COMMANDS("read", "Read a file through the client", "PATH")
    def read(self, turn: Turn, args: str) -> str:
        path = args
        # Each tool call gets a fresh id from the runtime: ACP wants them unique within a session.
        tool = turn.tool_call(title=f"Read {path}", kind="read", status="in_progress", locations=[path] if path else [])
        try:
            content = turn.read_text_file(path)
        except (CapabilityMissing, ClientError) as exc:
            tool.fail(f"Cannot read {path}: {exc}")
            return "end_turn"
        tool.complete(content=[text_content(content)])
        turn.say(f"{path}: {len(content)} characters")
        return "end_turn"

    @DEMO_COMMANDS("write", "Write a file through the client, after asking", "PATH TEXT")
    def write(self, turn: Turn, args: str) -> str:
        path, _, content = args.partition(" ")
        locations = [path] if path else []
        tool = turn.tool_call(title=f"Write {path}", kind="edit", status="pending", locations=locations)
        if not turn.can_write_files:  # never ask the user for what cannot happen
            tool.fail(f"Cannot write {path}: the client did not advertise fs.writeTextFile")
            turn.say("not written: the client cannot write files")
            return "end_turn"
        permission = turn.ask_permission(tool, title=f"Write {path}", kind="edit", status="pending", locations=locations)
        if not permission:  # the tool call is already failed with the reason
            turn.say(f"not written: {permission.reason}")
            return "end_turn"
        try:
            turn.write_text_file(path, content)
        except (CapabilityMissing, ClientError) as exc:
            tool.fail(f"Cannot write {path}: {exc}")
            return "end_turn"
        tool.complete()
        turn.say(f"wrote {len(content)} characters to {path}")
        return "end_turn"

    @DEMO_COMMANDS("mcp", "Call a tool on an MCP server of this session", "SERVER TOOL [JSON]")
    def mcp(self, turn: Turn, args: str) -> str:
        parts = args.split(None, 2)  # SERVER TOOL [JSON]: the JSON keeps its quotes and spaces
        if len(parts) < 2:
            turn.say("usage: /mcp SERVER TOOL [JSON]")
            return "end_turn"
        server, tool = parts[0], parts[1]
        arguments: Any = {}
        if len(parts) > 2:
            try:
                arguments = wire.loads(parts[2])
            except ValueError as exc:
                turn.say(f"usage: /mcp SERVER TOOL [JSON] (bad JSON: {exc})")
                return "end_turn"
            if not isinstance(arguments, dict):
                turn.say("usage: /mcp SERVER TOOL [JSON] (JSON must be an object)")
                return "end_turn"
        call = turn.tool_call(title=f"{server}.{tool}", kind="other", status="in_progress", raw_input=arguments)
        try:
            result = turn.mcp(server).call_tool(tool, arguments)
        except (McpUnavailable, RpcError) as exc:
            message = exc.message if isinstance(exc, RpcError) else str(exc)
            call.fail(f"{server}.{tool} failed: {message}")
            return "end_turn"
        from .mcp.client import result_text

        text = result_text(result)
        call.update(status="failed" if result.get("isError") else "completed", content=[text_content(text)])
        turn.say(text if len(text) <= 4096 else f"{text[:4096]}… ({len(text)} characters)")
        return "end_turn"

    @DEMO_COMMANDS("term", "Run a command in a client terminal and report its exit code", "COMMAND [ARGS...]")
    def term(self, turn: Turn, args: str) -> str:
        try:
            argv = shlex.split(args)
        except ValueError as exc:
            turn.say(f"usage: /term COMMAND [ARGS...] ({exc})")
            return "end_turn"
        if not argv:
            turn.say("usage: /term COMMAND [ARGS...]")
            return "end_turn"
        tool = turn.tool_call(title=f"Run {args}", kind="execute", status="pending")
        if not turn.can_run_terminals:
            tool.fail("Cannot run it: the client did not advertise terminals")
            turn.say("not run: the client cannot run terminals")
            return "end_turn"
        try:
            with turn.terminal(argv[0], argv[1:], output_byte_limit=TERMINAL_OUTPUT_LIMIT) as term:
                tool.update(status="in_progress", content=[term.content])
                status = term.wait_for_exit()  # a cancel kills the command; leaving the block releases it
                ended = f"exit code {status.exit_code}" if status.signal is None else f"killed by {status.signal}"
                # Before the release: the client keeps showing a terminal embedded before it.
                tool.update(status="completed" if status.succeeded else "failed", content=[term.content, content.text(ended)],
                            raw_output={"exitCode": status.exit_code, "signal": status.signal})
        except ClientError as exc:
            tool.fail(f"Cannot run it: {exc}")
            turn.say(f"not run: {exc.explanation}")
            return "end_turn"
        turn.say(f"{argv[0]}: {ended}")
        return "end_turn"

    @DEMO_COMMANDS("diff", "Propose a change to a file, shown as a diff", "PATH")
    def diff(self, turn: Turn, args: str) -> str:
        path = args
        if not path:
            turn.say("usage: /diff PATH")
            return "end_turn"
        tool = turn.tool_call(title=f"Edit {path}", kind="edit", status="in_progress", locations=[content.location(path)])
        old_text: str | None = None
        if turn.can_read_files:
            try:
                old_text = turn.read_text_file(path)
            except ClientError:
                old_text = None  # not readable: proposed as a new file
        new_text = (old_text or "") + DIFF_LINE
        tool.complete(content=[content.diff(path, new_text, old_text)])
        turn.say(f"proposed {'a new file' if old_text is None else 'one more line'} for {path}")
        return "end_turn"

    @DEMO_COMMANDS("ask", "Ask the user a question with a form and repeat the answer", "QUESTION")
    def ask(self, turn: Turn, args: str) -> str:
        question = args or "What should I say?"
        if not turn.can_elicit:
            turn.say("cannot ask: the client did not advertise form elicitation")
            return "end_turn"
        answer = turn.elicit(question, ASK_FORM)
        said = (answer.content or {}).get("answer")
        if answer.accepted and isinstance(said, str):
            turn.say(f"you answered: {said}")
        else:
            turn.say(f"no answer ({answer.action})")
        return "end_turn"


class ReportCommands:
    """The demo's command group that only reports: a plan, thoughts, the prompt's images, a failure on
    purpose, a notice, a compaction, and a long tool call a client may cancel alone (ACP v2)."""

    @DEMO_COMMANDS("fail", "Raise an error inside the agent")
    def fail(self, turn: Turn, args: str) -> str:
        raise RuntimeError("demo failure requested by /fail")

    @DEMO_COMMANDS("plan", "Show a plan")
    def plan(self, turn: Turn, args: str) -> str:
        steps = ["Read the question", "Think about it", "Answer"]
        entries: list[PlanEntry] = [{"content": s, "priority": "medium", "status": "pending"} for s in steps]
        turn.plan(entries)
        for entry in entries:
            entry["status"] = "completed"
            turn.plan(entries)
        turn.say("plan complete")
        return "end_turn"

    @DEMO_COMMANDS("think", "Show some reasoning")
    def think(self, turn: Turn, args: str) -> str:
        for thought in ("Considering the request. ", "Weighing the options. ", "Deciding."):
            turn.think(thought)
        turn.say("done thinking")
        return "end_turn"

    @DEMO_COMMANDS("image", "Describe the images sent with this prompt")
    def image(self, turn: Turn, args: str) -> str:
        from .blocks import ImageBlock

        images = [b for b in turn.blocks if isinstance(b, ImageBlock)]
        if not images:
            turn.say("no images")
            return "end_turn"
        for number, image in enumerate(images, 1):
            try:
                size = f"{len(image.decoded())} bytes"
            except ValueError:
                size = "not valid base64"
            turn.say(f"image {number}: {image.mime_type}, {size}" + (f", from {image.uri}" if image.uri else "") + "\n")
        return "end_turn"

    @DEMO_COMMANDS("notice", "Send a notice (when the client shows notices)", "[info|warning|error] TITLE")
    def notice(self, turn: Turn, args: str) -> str:
        severity, _, rest = args.strip().partition(" ")
        if severity not in NOTICE_SEVERITIES or not rest.strip():
            severity, rest = "info", args.strip()
        title = rest.strip() or "A notice from the demo"
        if turn.notice(title, severity=severity, description="Sent by the demo's /notice"):
            turn.say(f"sent a {severity} notice")
        else:
            # ACP's fallback for a client that shows no notices: say it as a message.
            turn.say(f"{severity}: {title} (the client did not advertise session.notices)")
        return "end_turn"

    @DEMO_COMMANDS("compact", "Report a context compaction with its summary (when the client shows them)")
    def compact(self, turn: Turn, args: str) -> str:
        if not turn.can_show_compaction:
            turn.say("the client did not advertise session.compaction: no compaction reported")
            return "end_turn"
        compaction = turn.compaction()
        for part in COMPACTION_SUMMARY:
            compaction.summary_chunk(part)
        compaction.complete(summary=[{"type": "text", "text": "".join(COMPACTION_SUMMARY)}])
        turn.say(f"compaction {compaction.id} completed")
        return "end_turn"

    @DEMO_COMMANDS("longtool", "A tool call that runs SECONDS; a client may cancel it alone", "SECONDS")
    def longtool(self, turn: Turn, args: str) -> str:
        seconds = _seconds(args)
        if seconds is None:
            turn.say("usage: /longtool SECONDS")
            return "end_turn"
        tool = turn.tool_call(title=f"Run for {args.strip()} s", kind="execute", status="in_progress", cancellable=True)
        if tool.sleep(seconds):
            tool.complete(content=[text_content("finished")])
            turn.say("the tool call finished")
            return "end_turn"
        if turn.cancelled:
            return "cancelled"  # the runtime closes the tool call with the turn
        tool.fail("Cancelled")
        turn.say("the tool call was cancelled; the turn goes on")
        return "end_turn"


class DemoAgent(Agent):
    """Deterministic: echoes text and obeys a small slash-command grammar (its commands are held
    in command groups; DEMO_COMMANDS advertises them in the order of docs/SERVE.md's table and binds each to its group)."""

    name = "acp-green-demo"
    title = "acp_green demo agent"
    version = "0.1.0"
    modes = (
        Mode("ask", "Ask", "Answer without changing anything"),
        Mode("code", "Code", "Allowed to write files (asks first)"),
    )
    config_options = (
        SelectOption(
            "model",
            "Model",
            (("echo-fast", "Echo (fast)"), ("echo-careful", "Echo (careful)")),
            default="echo-fast",
            description="Which pretend model answers",
            category="model",
        ),
    )
    commands = DEMO_COMMANDS
    accepts_images = True

    def __init__(self) -> None:
        self._commands = DEMO_COMMANDS.bind(PacingCommands(), ClientCommands(), ReportCommands())

    def prompt(self, turn: Turn) -> str | None:
        text = turn.text.strip()
        if not text.startswith("/"):
            reason = self._echo(turn, turn.text)
        else:
            command, _, rest = text[1:].partition(" ")
            run = self._commands.get(command)
            reason = run(turn, rest.strip()) if run else self._echo(turn, turn.text)
        self._report_usage(turn)
        return reason

    # -- echo and usage ----------------------------------------------------------------------
    def _echo(self, turn: Turn, text: str) -> str:
        for start in range(0, len(text), ECHO_CHUNK):
            turn.say(text[start : start + ECHO_CHUNK])
        return "end_turn"

    def _report_usage(self, turn: Turn) -> None:
        """Pretend token counts: one token per four bytes, as a stand-in for a model's report."""
        used = turn.session.state.get("context_used", 0)
        input_tokens = (turn.usage.input_bytes + 3) // 4
        output_tokens = (turn.usage.output_bytes + 3) // 4
        used = min(CONTEXT_WINDOW, used + input_tokens + output_tokens)
        turn.session.state["context_used"] = used
        turn.usage.report(input_tokens=input_tokens, output_tokens=output_tokens, context_used=used, context_size=CONTEXT_WINDOW)

    # -- the in-process MCP tool server ---------------------------------------------------
    def provided_mcp_servers(self) -> list[ToolServer]:
        return [DEMO_TOOLS]

    # -- extensions ------------------------------------------------------------------------
    def extension_methods(self) -> dict[str, Any]:
        return {"_acp_green/echo": self._ext_echo, "_acp_green/sleep": self._ext_sleep}

    def _ext_echo(self, call: ExtensionCall) -> Any:
        return {"params": call.params}

    def _ext_sleep(self, call: ExtensionCall) -> Any:
        seconds = float((call.params or {}).get("seconds", 0))
        call.token.wait(seconds)
        return {"slept": seconds}


def _tool_echo(call: ToolCall) -> str:
    return str(call.arguments.get("text", ""))


def _tool_sleep(call: ToolCall) -> str:
    seconds = float(call.arguments.get("seconds", 1))
    call.sleep(seconds)  # raises TurnCancelled when the MCP client cancels
    return f"slept {seconds:g}s"


def _tool_big(call: ToolCall) -> str:
    size = int(call.arguments.get("size", 1 << 20))
    return "x" * max(0, min(size, 64 << 20))


#: The demo's in-process MCP server, provided over ACP as "demo": a fast and a slow tool.
DEMO_TOOLS = ToolServer(
    "demo",
    [
        Tool("echo", _tool_echo, "Return the text at once (fast)",
             {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        Tool("sleep", _tool_sleep, "Wait SECONDS, cancellable (slow)",
             {"type": "object", "properties": {"seconds": {"type": "number"}}}),
        Tool("big", _tool_big, "Return a text of SIZE bytes",
             {"type": "object", "properties": {"size": {"type": "integer"}}}),
    ],
    version="0.1.0",
)


