"""How chat shows a session: message and thought chunks, tool calls with their content, plans, and a spinner.

Styles go through click, which drops them when stdout is not a terminal: a pipe gets plain text.
The spinner writes to stderr, only when stderr is a terminal, and only while a turn runs with
nothing shown yet; each frame is one character then a backspace, erased before anything else is
written, so the conversation on stdout is never interleaved with it. Whatever the agent sent is made
harmless (chat_text.py) before it is shown: no escape sequence of the agent's reaches the terminal.
"""

from __future__ import annotations

import difflib
import itertools
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import click
import gevent
from gevent.greenlet import Greenlet

from .chat_text import harmless, keep_styles

#: Longest diff shown (lines); the rest is counted, not printed.
MAX_DIFF_LINES = 400
SPINNER_FRAMES = "|/-\\"
SPINNER_DELAY = 0.2  # a turn that answers sooner shows no spinner at all
SPINNER_STEP = 0.1
PLAN_MARKS = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
FINAL_STATUSES = frozenset({"completed", "failed"})
THOUGHT_PREFIX = "thinking: "
#: The updates that show something, after which a thought's line is ended.
SHOWN_UPDATES = frozenset({"agent_message_chunk", "tool_call", "tool_call_update", "plan", "current_mode_update"})


class Screen:
    """Stdout for the conversation (whole lines kept apart from streamed text), stderr for notes and the spinner."""

    def __init__(self, spinner: bool) -> None:
        self.mid_line = False
        self._spinner_allowed = spinner
        self._spinner: Greenlet | None = None
        self._spun = False

    def text(self, text: str) -> None:
        """Streamed text, as it comes (no newline added)."""
        if not text:
            return
        self.stop_spinner()
        text = keep_styles(text)
        click.echo(text, nl=False)
        self.mid_line = not click.unstyle(text).endswith("\n")

    def line(self, text: str) -> None:
        """A whole line of its own, after ending any streamed text."""
        self.stop_spinner()
        if self.mid_line:
            click.echo()
        click.echo(keep_styles(text))
        self.mid_line = False

    def end_line(self) -> None:
        """End the streamed line, if one is open (nothing else is written)."""
        if self.mid_line:
            click.echo()
            self.mid_line = False

    def note(self, text: str) -> None:
        """One line on stderr (what chat itself has to say, not the agent)."""
        self.stop_spinner()
        if self.mid_line:
            click.echo()
            self.mid_line = False
        click.echo(keep_styles(text), err=True)

    def start_spinner(self) -> None:
        """Spin on stderr until something is shown (stderr a terminal only)."""
        if self._spinner_allowed and self._spinner is None:
            self._spinner = gevent.spawn(self._spin)

    def stop_spinner(self) -> None:
        spinner, self._spinner = self._spinner, None
        if spinner is None:
            return
        spinner.kill(block=True)  # it never yields mid-frame: writes to the terminal do not wait on the hub
        if self._spun:
            sys.stderr.write(" \b")
            sys.stderr.flush()
            self._spun = False

    def _spin(self) -> None:
        gevent.sleep(SPINNER_DELAY)
        for frame in itertools.cycle(SPINNER_FRAMES):
            sys.stderr.write(frame + "\b")
            sys.stderr.flush()
            self._spun = True
            gevent.sleep(SPINNER_STEP)


@dataclass
class ToolCallView:
    """What chat knows of one tool call: ACP sends changes, chat keeps the whole."""

    title: str
    kind: str = "other"
    status: str = "pending"
    content: list[Any] = field(default_factory=list)
    shown: set[str] = field(default_factory=set)  # content already printed, so an update does not repeat it


def diff_lines(path: str, old_text: str | None, new_text: str) -> list[str]:
    """A unified diff of a file's change (no old text: a new file), styled, at most MAX_DIFF_LINES lines."""
    old = [] if old_text is None else old_text.splitlines(keepends=True)
    lines = [harmless(line.rstrip("\n")) for line in difflib.unified_diff(
        old, new_text.splitlines(keepends=True), "/dev/null" if old_text is None else path, path)]
    if not lines:
        return [click.style(f"(no change to {harmless(path)})", dim=True)]
    shown = [_diff_style(line) for line in lines[:MAX_DIFF_LINES]]
    if len(lines) > MAX_DIFF_LINES:
        shown.append(click.style(f"… {len(lines) - MAX_DIFF_LINES} more diff lines", dim=True))
    return shown


def _diff_style(line: str) -> str:
    if line.startswith(("+++", "---")):
        return click.style(line, bold=True)
    if line.startswith("+"):
        return click.style(line, fg="green")
    if line.startswith("-"):
        return click.style(line, fg="red")
    if line.startswith("@@"):
        return click.style(line, fg="cyan")
    return line


def plan_lines(entries: list[Any]) -> list[str]:
    """A plan as a checklist: [ ] pending, [~] in progress, [x] completed."""
    lines = [click.style("[plan]", fg="magenta")]
    for entry in entries:
        entry = entry if isinstance(entry, dict) else {}
        mark = PLAN_MARKS.get(str(entry.get("status")), "[?]")
        lines.append(f"  {mark} {harmless(entry.get('content', ''))}")
    return lines


def block_text(block: Any) -> str:
    """The text of a content block (made harmless), or a placeholder naming its type."""
    if isinstance(block, dict):
        if block.get("type") == "text":
            return harmless(block.get("text", ""))
        return harmless(f"[{block.get('type')}]")
    return ""


TerminalText = Callable[[str], str | None]


def content_lines(item: Any, terminal_text: TerminalText) -> list[str]:
    """One piece of tool-call content as lines: text, a unified diff, or a terminal's output."""
    if not isinstance(item, dict):
        return []
    kind = item.get("type")
    if kind == "content":
        return block_text(item.get("content")).splitlines() or [""]
    if kind == "diff":
        return diff_lines(str(item.get("path")), item.get("oldText"), str(item.get("newText", "")))
    if kind == "terminal":
        output = terminal_text(str(item.get("terminalId")))
        header = click.style(harmless(f"[terminal {item.get('terminalId')}]"), dim=True)
        return [header] + (harmless(output).splitlines() if output else [])
    return [harmless(f"[{kind}]")]


class Renderer:
    """Turns one session's `session/update` notifications into terminal output.

    Thoughts are set apart from the reply: they start a line of their own after a dim
    `thinking:` prefix, and whatever comes after them starts on a new line.
    """

    def __init__(self, session_id: str | None, screen: Screen, terminal_text: TerminalText) -> None:
        self.session_id = session_id  # None: no session yet, nothing is shown
        self.screen = screen
        self.terminal_text = terminal_text
        self.commands: list[str] = []
        self.tools: dict[str, ToolCallView] = {}
        self.thinking = False  # the open line holds a thought

    def switch(self, session_id: str) -> None:
        """Show `session_id` from now on (a new, loaded or resumed session); its tool calls are its own."""
        self.session_id = session_id
        self.tools = {}

    def __call__(self, message: dict[str, Any]) -> None:
        if message.get("method") != "session/update":
            return
        params = message.get("params")
        if not isinstance(params, dict) or params.get("sessionId") != self.session_id:
            return
        update = params.get("update")
        if not isinstance(update, dict):
            return
        kind = update.get("sessionUpdate")
        if kind == "agent_thought_chunk":
            self.thought(block_text(update.get("content")))
            return
        if self.thinking and kind in SHOWN_UPDATES:  # the reply (or a tool, a plan) starts on a line of its own
            self.screen.end_line()
            self.thinking = False
        if kind == "agent_message_chunk":
            self.screen.text(block_text(update.get("content")))
        elif kind in ("tool_call", "tool_call_update"):
            self.tool(update)
        elif kind == "plan":
            for line in plan_lines(update.get("entries") or []):
                self.screen.line(line)
        elif kind == "available_commands_update":
            self.commands = [harmless(c.get("name", "")) for c in update.get("availableCommands") or [] if isinstance(c, dict)]
        elif kind == "current_mode_update":
            self.screen.line(click.style(harmless(f"[mode] {update.get('currentModeId')}"), fg="magenta"))

    def thought(self, text: str) -> None:
        """A piece of the agent's reasoning: dim and italic, after `thinking:` at the start of a line."""
        if not text:
            return
        if not self.thinking or not self.screen.mid_line:
            self.screen.end_line()
            self.screen.text(click.style(THOUGHT_PREFIX, dim=True, italic=True))
            self.thinking = True
        self.screen.text(click.style(text, dim=True, italic=True))

    def tool(self, update: dict[str, Any]) -> None:
        """A tool call or a change to one: its status line when the status changes, then new content."""
        tool_id = str(update.get("toolCallId"))
        view = self.tools.get(tool_id)
        announced = view is None
        if view is None:
            view = self.tools[tool_id] = ToolCallView(str(update.get("title") or tool_id))
        before = view.status
        for name in ("title", "kind", "status"):
            if isinstance(update.get(name), str):
                setattr(view, name, update[name])
        if isinstance(update.get("content"), list):
            view.content = update["content"]
        if announced or view.status != before:
            colour = "red" if view.status == "failed" else "cyan"
            self.screen.line(click.style(harmless(f"[tool] {view.title} ({view.kind}): {view.status}"), fg=colour))
            if view.status == "failed" and not view.content:
                self.screen.line("    " + click.style("(the agent gave no reason)", dim=True))
        self.show_content(view)

    def show_content(self, view: ToolCallView) -> None:
        """Print the tool call's content not printed yet (a terminal only once its command ended)."""
        for item in view.content:
            if isinstance(item, dict) and item.get("type") == "terminal" and view.status not in FINAL_STATUSES:
                continue
            key = json.dumps(item, sort_keys=True, default=str)
            if key in view.shown:
                continue
            view.shown.add(key)
            for line in content_lines(item, self.terminal_text):
                self.screen.line("    " + line)

    def end_turn(self, outcome: str) -> None:
        self.thinking = False
        self.screen.line(click.style(harmless(f"[{outcome}]"), fg="green" if outcome == "end_turn" else "red"))
