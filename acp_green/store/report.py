"""What `acp-green sessions` and `acp-green usage` show: read straight from the state database.

These run outside any ACP connection (no hub to protect), so they use the database directly
and synchronously; WAL lets them read while agents are writing. They never create the state
directory or the database, never change a mode and never migrate: that is `serve`'s job.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from . import private, statedb
from .session_record import SessionRecord
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
    if conn is None:
        yield None
        return
    try:
        yield conn
    finally:
        conn.close()


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def json_text(value: Any) -> str:
    """Indented JSON that keeps non-ASCII text readable and any str exact.

    A lone surrogate (how a non-UTF-8 path byte reaches Python) cannot be written as UTF-8, so
    it is written as its \\u escape, which a JSON reader turns back into the same str.
    """
    text = json.dumps(value, indent=2, ensure_ascii=False)
    return _LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def printable(text: str) -> str:
    """`text` for a terminal: a lone surrogate is shown as its \\u escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def session_dict(record: SessionRecord) -> dict[str, Any]:
    return {
        "sessionId": record.session_id,
        "cwd": record.cwd,
        "additionalDirectories": list(record.additional_directories),
        "title": record.title,
        "modeId": record.mode_id,
        "config": dict(record.config),
        "updatedAt": record.updated_at,
    }


def export_sessions(conn: sqlite3.Connection | None, session_ids: list[str] | None = None) -> list[dict[str, Any]]:
    """Sessions with their whole history (all when `session_ids` is empty)."""
    if conn is None:
        return []
    if session_ids:
        records = [r for r in (statedb.load_session(conn, sid) for sid in session_ids) if r is not None]
    else:
        records = statedb.list_sessions(conn)
    return [{**session_dict(r), "history": [json.loads(e) for e in statedb.history(conn, r.session_id)]} for r in records]


def render_history(history: list[dict[str, Any]]) -> list[str]:
    """A readable transcript: consecutive message chunks joined, other updates one line each."""
    lines: list[str] = []
    current: str | None = None
    text: list[str] = []

    def flush() -> None:
        if current is not None:
            lines.append(f"{current}: {''.join(text)}")

    labels = {"user_message_chunk": "user", "agent_message_chunk": "agent", "agent_thought_chunk": "thought"}
    for entry in history:
        kind = entry.get("sessionUpdate")
        if kind in labels:
            content = entry.get("content") or {}
            piece = content.get("text") if content.get("type") == "text" else f"[{content.get('type')}]"
            if labels[kind] != current:
                flush()
                current, text = labels[kind], []
            text.append(piece or "")
            continue
        flush()
        current, text = None, []
        if kind in ("tool_call", "tool_call_update"):
            lines.append(f"{kind}: {entry.get('toolCallId')} {entry.get('title') or ''} {entry.get('status') or ''}".rstrip())
        else:
            lines.append(f"{kind}")
    flush()
    return lines


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


def usage_report(conn: sqlite3.Connection | None, session_id: str | None = None, with_records: bool = False) -> dict[str, Any]:
    """Totals, per-session totals (busiest first) and optionally every record."""
    records = with_interrupted(statedb.usage(conn, session_id)) if conn is not None else []
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
            entry["sessionId"], str(entry["prompts"]), str(entry["inputBytes"]), str(entry["outputBytes"]),
            str(entry["inputTokens"]), str(entry["outputTokens"]), f"{entry['durationSeconds']:.3f}",
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))) for row in rows]
