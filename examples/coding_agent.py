"""A coding agent's whole loop on acp_green: read a file, propose a diff, ask, write, run a check.

There is no model here, so every step is visible: the prompt names the change.

    file: app.py
    replace: return 1
    with: return 2
    run: python3 -m pytest -q

The agent reads `file` through the editor (unsaved buffers included), shows the change as a diff
in an `edit` tool call, asks permission, writes the file through the editor, runs the `run`
command in an editor terminal embedded in an `execute` tool call, and reports its exit code.
Relative paths are from the session's cwd. Cancelling stops it at any step: the runtime kills
the command and releases the terminal, and every tool call ends `completed` or `failed`.

Run it as the agent command of an editor: `python examples/coding_agent.py`, or
`acp-green serve --agent examples/coding_agent.py:CodingAgent`.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass

from acp_green import Agent, ClientError, ServeOptions, Turn, serve_stdio
from acp_green.content import diff, location, text

FIELDS = ("file", "replace", "with", "run")


@dataclass(frozen=True)
class Change:
    """What one prompt asks for: in `path`, `old` becomes `new`; then `command` runs (if any)."""

    path: str
    old: str
    new: str
    command: list[str]


def parse_change(prompt: str) -> Change:
    """`key: value` lines (file, replace, with, run); ValueError names what is missing."""
    values: dict[str, str] = {}
    for line in prompt.splitlines():
        key, colon, value = line.partition(":")
        if colon and key.strip().lower() in FIELDS:
            values[key.strip().lower()] = value.strip()
    missing = [name for name in FIELDS[:3] if not values.get(name) and not (name == "with" and "with" in values)]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}: write `file: PATH`, `replace: OLD`, `with: NEW`, "
                         "and optionally `run: COMMAND`, one per line")
    try:
        command = shlex.split(values.get("run", ""))
    except ValueError as exc:  # unbalanced quotes: said like any other mistake in the prompt
        raise ValueError(f"cannot split `run: {values['run']}` as a shell would: {exc}") from None
    return Change(values["file"], values["replace"], values["with"], command)


class CodingAgent(Agent):
    """Edits one file as the prompt says and runs a check; every step is an ACP tool call."""

    name = "coding-agent"

    def prompt(self, turn: Turn) -> str:
        try:
            change = parse_change(turn.text)
        except ValueError as exc:
            turn.say(str(exc))
            return "end_turn"
        missing = [what for what, ok in (("read files", turn.can_read_files), ("write files", turn.can_write_files),
                                         ("run terminals", turn.can_run_terminals or not change.command)) if not ok]
        if missing:  # say so before asking the user anything
            turn.say(f"This client cannot {' or '.join(missing)}, which this agent needs.")
            return "end_turn"
        if self.edit(turn, change) and change.command:
            self.run(turn, change.command)
        return "end_turn"

    def edit(self, turn: Turn, change: Change) -> bool:
        """Read, propose, ask, write; True once the file holds the change."""
        where = [location(change.path)]
        # No ids given: the runtime makes each tool call's, unique within the session.
        read = turn.tool_call(title=f"Read {change.path}", kind="read", status="in_progress", locations=where)
        try:
            before = turn.read_text_file(change.path)
        except ClientError as exc:
            read.fail(f"Could not read it: {exc.explanation}")
            return False
        read.complete()
        if change.old not in before:
            turn.say(f"{change.path} does not contain {change.old!r}; nothing changed.")
            return False
        after = before.replace(change.old, change.new, 1)
        proposal = [diff(change.path, after, before)]
        edit = turn.tool_call(title=f"Edit {change.path}", kind="edit", content=proposal, locations=where)
        if not turn.ask_permission(edit, title=f"Edit {change.path}", kind="edit", content=proposal, locations=where).granted:
            turn.say("Not changed: permission was not given.")
            return False
        try:
            turn.write_text_file(change.path, after)
        except ClientError as exc:
            edit.fail(f"Could not write it: {exc.explanation}")
            return False
        edit.complete()
        return True

    def run(self, turn: Turn, command: list[str]) -> None:
        """Run the check in an editor terminal shown in the tool call; report its exit code."""
        shown = shlex.join(command)
        check = turn.tool_call(title=f"Run {shown}", kind="execute", status="in_progress")
        with turn.terminal(command[0], command[1:], cwd=".") as term:
            check.update(content=[term.content])
            status = term.wait_for_exit()
            output = term.output()
        outcome = f"`{shown}` exited with code {status.exit_code}" if status.signal is None else \
            f"`{shown}` was ended by signal {status.signal}"
        check.update(status="completed" if status.succeeded else "failed", content=[text(output.output), text(outcome)])
        turn.say(f"Changed the file; {outcome}.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="An ACP coding agent: edit one file as asked, then run a check.")
    parser.add_argument("--state-dir", help="where sessions and usage are kept (default: as acp-green serve)")
    parser.add_argument("--log-level", default="WARNING", help="log threshold; logs go to stderr (default: WARNING)")
    args = parser.parse_args()
    raise SystemExit(serve_stdio(CodingAgent(), ServeOptions(state_dir=args.state_dir), log_level=args.log_level))
