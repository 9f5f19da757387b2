"""What `acp-green sessions` and `acp-green usage` show: read through the store's `Database`
interface (database.py), from a state directory's SQLite file or a PostgreSQL server alike.

These run outside any ACP connection (no hub to protect), so they use the database directly
and synchronously; WAL lets them read while agents are writing. On SQLite they never create the
state directory or the database, never change a mode and never migrate: that is `serve`'s job.
A delete takes each session's lock as an agent would, so a session live in a running agent is
refused, naming it, instead of being deleted under it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

from . import private, statedb
from .database import Database
from .session_record import SessionRecord
from .turns import HistoryPosition, StoredTurn
from ..terminal_text import shown
from ..usage import RUNNING, UsageRecord


class StateUnreadable(Exception):
    """The state database exists but cannot be opened (corrupt, unreadable, newer schema)."""


@contextlib.contextmanager
def open_db(state_dir: str, *, write: bool = False) -> Iterator[sqlite3.Connection | None]:
    """The state database of `state_dir` (read-only unless `write`), or None when nothing was
    ever stored there (no database file, or one without a schema yet); nothing is created."""
    path = statedb.db_path(state_dir)
    conn = None
    if os.path.lexists(path):
        try:
            private.refuse_symlink(path)
            conn = statedb.connect_existing(path, write=write)
        except (OSError, sqlite3.Error, statedb.StateDbError) as exc:
            raise StateUnreadable(f"cannot open {path}: {exc}") from None
        if conn is None and _holds_bytes_without_schema(path):
            raise StateUnreadable(f"cannot open {path}: not a state database (it holds bytes but no schema: truncated or overwritten?)")
    if conn is None:
        yield None
        return
    try:
        yield conn
    finally:
        conn.close()


@contextlib.contextmanager
def open_database(state_dir: str, store_url: str | None = None, *, write: bool = False) -> Iterator[Database | None]:
    """The store's database for an inspection command: the PostgreSQL server at `store_url`,
    else the SQLite database of `state_dir` (None when nothing was stored there yet). A
    database that cannot be opened raises StateUnreadable."""
    if store_url is not None:
        from .postgres import PostgresOpener

        try:
            server = PostgresOpener(store_url).open_existing()
        except Exception as exc:  # psycopg's errors, or a newer schema: one line, not a traceback
            raise StateUnreadable(f"cannot open {PostgresOpener(store_url).name}: {str(exc).strip()}") from None
        try:
            yield server
        finally:
            if server is not None:
                server.close()
        return
    with open_db(state_dir, write=write) as conn:
        if conn is None:
            yield None
            return
        from .session_locks import SessionLockFiles
        from .sqlite import SqliteDatabase

        yield SqliteDatabase(conn, SessionLockFiles(state_dir) if write else None)


def _holds_bytes_without_schema(path: str) -> bool:
    """A database file with content that SQLite reads as empty (a file cut to a few bytes).

    `serve` creates the file empty and migrates it in its first transaction, so a state
    database is either empty (nothing stored yet) or has a schema; without a -wal beside it
    (whose frames may hold the schema of a database being created right now) anything else is
    damage, not "nothing stored".
    """
    try:
        size = os.path.getsize(path)
    except OSError:
        return False
    return size > 0 and not os.path.lexists(path + "-wal")


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def json_text(value: Any) -> str:
    """Indented JSON that keeps non-ASCII text readable and any str exact.

    A lone surrogate (how a non-UTF-8 path byte reaches Python) cannot be written as UTF-8, so
    it is written as its \\u escape, which a JSON reader turns back into the same str.
    """
    text = json.dumps(value, indent=2, ensure_ascii=False)
    return _LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def printable(text: str, *, newlines: bool = False) -> str:
    """`text` for a terminal (terminal_text.shown): no escape sequence or control character in it
    is acted on, each written as a visible escape, newlines too unless `newlines`; a lone
    surrogate (an undecodable byte of a path) as its \\u escape."""
    return shown(text, newlines=newlines)


def session_dict(record: SessionRecord) -> dict[str, Any]:
    return {
        "sessionId": record.session_id,
        "cwd": record.cwd,
        "additionalDirectories": list(record.additional_directories),
        "title": record.title,
        "modeId": record.mode_id,
        "config": dict(record.config),
        "updatedAt": record.updated_at,
        "archived": record.archived,
        "forkedFrom": record.forked_from,
    }


def session_marks(record: SessionRecord) -> str:
    """What `sessions list` adds to a session's line: `[archived]`, `[forked from ID]`."""
    marks = ["[archived]"] if record.archived else []
    if record.forked_from is not None:
        marks.append(f"[forked from {record.forked_from}]")
    return " ".join(marks)


def turn_dict(turn: StoredTurn) -> dict[str, Any]:
    return {
        "turnId": turn.turn_id,
        "startedAt": turn.started_at,
        "stopReason": turn.stop_reason,
        "error": turn.error,
        "complete": turn.complete,
    }


def export_sessions(db: Database | None, session_ids: list[str] | None = None) -> list[dict[str, Any]]:
    """Sessions with their turns and their whole history (all sessions when `session_ids` is empty)."""
    if db is None:
        return []
    if session_ids:
        records = [r for r in (db.load_session(sid) for sid in session_ids) if r is not None]
    else:
        records = db.list_sessions()
    return [
        {
            **session_dict(r),
            "turns": [turn_dict(t) for t in db.turns(r.session_id)],
            "history": [json.loads(e) for e in db.history(r.session_id)],
        }
        for r in records
    ]


def delete_sessions(db: Database, session_ids: list[str]) -> tuple[list[str], dict[str, str]]:
    """Delete the stored sessions named, in one transaction: (the ids deleted, and for each one
    live in a running agent, that agent: left alone). Unknown ids are neither."""
    held: dict[str, str] = {}
    locked: list[str] = []
    try:
        for session_id in session_ids:
            holder = db.lock_session(session_id)
            if holder is None:
                locked.append(session_id)
            else:
                held[session_id] = holder
        db.begin_write()
        try:
            found = [sid for sid in locked if db.load_session(sid) is not None]
            for session_id in found:
                db.delete_session(session_id)
            db.commit()
        except BaseException:  # ok: roll back, then re-raise
            if db.in_transaction:
                db.rollback()
            raise
    finally:
        for session_id in locked:
            db.unlock_session(session_id)
    return found, held


PAGE_ENTRIES = 1000  # what `sessions show` reads at a time: at most this many updates,
PAGE_BYTES = 1 << 20  # and about this many bytes (one update alone may be larger)
MESSAGE_CHARS = 2000  # without --full: the characters of a message shown, the rest counted
TURN_LINES = 100  # without --full: the lines of a turn shown, the rest counted


def turn_updates(db: Database, session_id: str, turn_id: str) -> Iterator[dict[str, Any]]:
    """A stored turn's updates, read a page at a time; an entry that is not a JSON object shows as unreadable."""
    after: HistoryPosition | None = None
    while True:
        page = db.history_page(session_id, after, PAGE_ENTRIES, PAGE_BYTES, turn_id)
        for entry in page.entries:
            try:
                update = json.loads(entry.update)
            except ValueError:
                update = None
            yield update if isinstance(update, dict) else {"sessionUpdate": "[unreadable entry]"}
        if page.after is None:
            return
        after = page.after


def turn_heading(number: int, turn: StoredTurn) -> str:
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(turn.started_at))
    heading = f"turn {number} ({started}): {turn.outcome}"
    if not turn.complete:
        heading += " [incomplete: some of its updates could not be stored]"
    return heading


def render_turns(db: Database, session_id: str, *, full: bool = False) -> Iterator[str]:
    """The session's conversation as text fragments (each ends its lines itself), turn by turn:
    a heading with the turn's outcome, then its messages; without `full`, long messages and long
    turns are cut, with a note of how much. Reads a page at a time, never the whole history."""
    for number, turn in enumerate(db.turns(session_id), 1):
        yield turn_heading(number, turn) + "\n"
        transcript = Transcript(None if full else MESSAGE_CHARS, None if full else TURN_LINES)
        for update in turn_updates(db, session_id, turn.turn_id):
            yield from transcript.feed(update)
        yield from transcript.end()


_LABELS = {"user_message_chunk": "user", "agent_message_chunk": "agent", "agent_thought_chunk": "thought"}


class Transcript:
    """Stored updates as readable text, written as it is read: consecutive chunks of one message
    on one line, every other update a line of its own.

    A message is a run of chunks of one kind (and one `messageId`, when they carry one). With
    `message_chars`, a message shows that many characters and a note of how many more it had;
    with `max_lines`, that many lines show and a note says how many more there were. Only what
    is shown is ever held, so a message of any length costs the same.
    """

    def __init__(self, message_chars: int | None = None, max_lines: int | None = None) -> None:
        self.message_chars = message_chars
        self.max_lines = max_lines
        self._message: tuple[str, Any] | None = None  # (label, messageId) of the open message
        self._shown = 0  # characters of the open message written
        self._cut = 0  # characters of the open message not written
        self._lines = 0  # lines begun
        self._cut_lines = 0

    def feed(self, update: dict[str, Any]) -> Iterator[str]:
        kind = update.get("sessionUpdate")
        label = _LABELS.get(kind) if isinstance(kind, str) else None
        if label is not None:
            message = (label, update.get("messageId"))
            if message != self._message:
                yield from self._close()
                self._message = message
                if not (yield from self._begin_line(f"{label}: ")):
                    return
            if self.max_lines is not None and self._lines > self.max_lines:
                return  # this message's line was cut
            yield from self._text(_chunk_text(update.get("content")))
            return
        yield from self._close()
        if (yield from self._begin_line(_update_line(kind, update))):
            yield "\n"

    def end(self) -> Iterator[str]:
        """Close the open message; then the note of lines cut, if any."""
        yield from self._close()
        if self._cut_lines:
            yield f"... {self._cut_lines} more lines of this turn not shown (--full shows everything)\n"

    def _begin_line(self, text: str) -> Generator[str, None, bool]:
        """Start a line with `text`, unless the turn is over its lines; True if it was started."""
        self._lines += 1
        if self.max_lines is not None and self._lines > self.max_lines:
            self._cut_lines += 1
            return False
        yield text
        return True

    def _text(self, text: str) -> Iterator[str]:
        if self.message_chars is None:
            if text:
                yield text
            return
        room = self.message_chars - self._shown
        if room > 0 and text:
            yield text[:room]
            self._shown += min(room, len(text))
        self._cut += max(len(text) - max(room, 0), 0)

    def _close(self) -> Iterator[str]:
        if self._message is None:
            return
        shown = self.max_lines is None or self._lines <= self.max_lines
        if shown:
            if self._cut:
                yield f" ... [{self._cut} more characters; --full shows everything]"
            yield "\n"
        self._message, self._shown, self._cut = None, 0, 0


def _chunk_text(content: Any) -> str:
    """A chunk's text; content that is not text shows as its type in brackets."""
    if not isinstance(content, dict):
        return ""
    if content.get("type") == "text":
        text = content.get("text")
        return text if isinstance(text, str) else ""
    return f"[{content.get('type')}]"


def _update_line(kind: Any, update: dict[str, Any]) -> str:
    if kind in ("tool_call", "tool_call_update"):
        return f"{kind}: {update.get('toolCallId')} {update.get('title') or ''} {update.get('status') or ''}".rstrip()
    if kind == "notice":
        description = update.get("description")
        detail = f" ({description})" if isinstance(description, str) and description else ""
        return f"notice [{update.get('severity')}]: {update.get('title')}{detail}"
    if kind == "compaction_update":
        error = update.get("error")
        line = f"compaction: {update.get('compactionId')} {update.get('status')}"
        summary = update.get("summary")
        if isinstance(summary, list) and summary:
            line += ": " + "".join(_chunk_text(block) for block in summary)
        return line + (f" ({error})" if isinstance(error, str) and error else "")
    if kind == "compaction_summary_chunk":
        return f"compaction summary: {update.get('compactionId')} {_chunk_text(update.get('content'))}"
    return f"{kind}"


@dataclass(slots=True)
class UsageTotals:
    """Sums over a set of usage records."""

    prompts: int = 0
    input_bytes: int = 0
    output_bytes: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    duration: float = 0.0
    by_stop_reason: dict[str, int] = field(default_factory=dict)

    def add(self, record: UsageRecord) -> None:
        self.prompts += 1
        self.input_bytes += record.input_bytes
        self.output_bytes += record.output_bytes
        self.input_tokens += record.input_tokens or 0
        self.output_tokens += record.output_tokens or 0
        self.duration += record.duration
        self.by_stop_reason[record.stop_reason] = self.by_stop_reason.get(record.stop_reason, 0) + 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompts": self.prompts,
            "inputBytes": self.input_bytes,
            "outputBytes": self.output_bytes,
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "durationSeconds": round(self.duration, 6),
            "byStopReason": dict(sorted(self.by_stop_reason.items())),
        }


INTERRUPTED = "interrupted"


def _pid_alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def with_interrupted(records: list[UsageRecord]) -> list[UsageRecord]:
    """A "running" record whose process is gone is a prompt that was interrupted (SIGKILL)."""
    for record in records:
        if record.stop_reason == RUNNING and not _pid_alive(record.pid):
            record.stop_reason = INTERRUPTED
    return records


def usage_report(db: Database | None, session_id: str | None = None, with_records: bool = False) -> dict[str, Any]:
    """Totals, per-session totals (busiest first) and optionally every record."""
    records = with_interrupted(db.usage(session_id)) if db is not None else []
    total = UsageTotals()
    per_session: dict[str, UsageTotals] = {}
    for record in records:
        total.add(record)
        per_session.setdefault(record.session_id, UsageTotals()).add(record)
    report: dict[str, Any] = {
        "totals": total.to_dict(),
        "sessions": [
            {"sessionId": sid, **totals.to_dict()}
            for sid, totals in sorted(per_session.items(), key=lambda item: (-item[1].prompts, item[0]))
        ],
    }
    if with_records:
        report["records"] = [r.to_dict() for r in records]
    return report


def usage_table(report: dict[str, Any]) -> list[str]:
    """The usage report as aligned text rows."""
    header = ("session", "prompts", "in bytes", "out bytes", "in tokens", "out tokens", "seconds")
    rows = [header]
    for entry in [*report["sessions"], {"sessionId": "TOTAL", **report["totals"]}]:
        rows.append((
            printable(entry["sessionId"]), str(entry["prompts"]), str(entry["inputBytes"]), str(entry["outputBytes"]),
            str(entry["inputTokens"]), str(entry["outputTokens"]), f"{entry['durationSeconds']:.3f}",
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))) for row in rows]
