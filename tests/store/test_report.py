"""The reports of the state database (store/report.py): `acp-green sessions show` prints turns one by
one with their outcome, cuts long output saying how much (`--full` prints everything), reads the
history a page at a time, and opens the database read-only; `acp-green usage` sums the ledger."""

from __future__ import annotations

import json
import os
import sqlite3

from click.testing import CliRunner

from acp_green.cli import cli
from acp_green.store import report, statedb
from acp_green.store.session_record import SessionRecord
from acp_green.store.sqlite import SqliteStore
from acp_green.store.turns import TurnOutcome
from acp_green.usage import UsageRecord
from tests.store.test_inspection import files_of

CHUNK = "abcdefghijkl"  # a reply chunk is this and a digit: 13 characters, so a cut falls inside one
LONG_REPLY = 13_000  # characters of the third turn's reply
TOOL_CALLS = 300


def update(kind: str, text: str, message_id: str) -> bytes:
    return json.dumps({"sessionUpdate": kind, "messageId": message_id, "content": {"type": "text", "text": text}}).encode()


def three_turns(state: str) -> None:
    """`/fail` (failed: boom), `/sleep 0` (end_turn), then `hello` answered at length, with many
    tool calls after; written the way the store thread writes them, no process left holding it."""
    os.makedirs(state, mode=0o700, exist_ok=True)
    conn = statedb.connect(statedb.db_path(state))
    try:
        statedb.save_session(conn, SessionRecord("s", "/w", title="three"))
        statedb.begin_turn(conn, "s", "t1", 1.0, [update("user_message_chunk", "/fail", "u1")])
        statedb.end_turn(conn, "s", "t1", TurnOutcome("error", "boom"))
        statedb.begin_turn(conn, "s", "t2", 2.0, [update("user_message_chunk", "/sleep 0", "u2")])
        statedb.end_turn(conn, "s", "t2", TurnOutcome("end_turn"))
        statedb.begin_turn(conn, "s", "t3", 3.0, [update("user_message_chunk", "hello", "u3")])
        for n in range(LONG_REPLY // 13):  # the reply arrives as 1,000 chunks of 13 characters
            statedb.append_history(conn, "s", "t3", [update("agent_message_chunk", CHUNK + str(n % 10), "a3")])
        statedb.append_history(conn, "s", "t3", [
            json.dumps({"sessionUpdate": "tool_call", "toolCallId": f"c{n}", "title": "read", "status": "completed"}).encode()
            for n in range(TOOL_CALLS)
        ])
        statedb.end_turn(conn, "s", "t3", TurnOutcome("end_turn"))
    finally:
        conn.close()


def show(state: str, *extra: str) -> str:
    done = CliRunner().invoke(cli, ["sessions", "show", "s", "--state-dir", state, *extra], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    return done.output


def test_turns_show_one_by_one_with_their_outcome_and_long_output_is_cut_saying_how_much(tmp_path):
    """Three prompts are three turns, each with its outcome ("failed: boom", "end_turn"), never
    one merged user line; a long reply shows MESSAGE_CHARS characters and how many more it had;
    a long turn shows TURN_LINES lines and how many more there were."""
    state = str(tmp_path / "state")
    three_turns(state)
    lines = show(state).splitlines()
    headings = [line for line in lines if line.startswith("turn ")]
    assert [h.split(": ", 1)[1] for h in headings] == ["failed: boom", "end_turn", "end_turn"]
    first = lines.index(headings[0])
    assert lines[first + 1: first + 4] == ["user: /fail", headings[1], "user: /sleep 0"]
    assert lines[first + 4: first + 6] == [headings[2], "user: hello"]
    reply = lines[first + 6]
    cut = LONG_REPLY - report.MESSAGE_CHARS
    whole = "".join(CHUNK + str(n % 10) for n in range(LONG_REPLY // 13))
    assert report.MESSAGE_CHARS % 13  # the cut falls inside a chunk
    assert reply == "agent: " + whole[: report.MESSAGE_CHARS] + f" ... [{cut} more characters; --full shows everything]"
    tool_lines = [line for line in lines if line.startswith("tool_call: ")]
    assert tool_lines[0] == "tool_call: c0 read completed"
    shown_lines = 2 + len(tool_lines)  # user, agent, then tool calls
    assert shown_lines == report.TURN_LINES
    assert lines[-1] == f"... {2 + TOOL_CALLS - report.TURN_LINES} more lines of this turn not shown (--full shows everything)"


def test_full_prints_everything(tmp_path):
    state = str(tmp_path / "state")
    three_turns(state)
    lines = show(state, "--full").splitlines()
    reply = next(line for line in lines if line.startswith("agent: "))
    assert len(reply) == len("agent: ") + LONG_REPLY and "more characters" not in reply
    assert sum(line.startswith("tool_call: ") for line in lines) == TOOL_CALLS
    assert not any("not shown" in line for line in lines)


def test_show_reads_pages_never_the_whole_history_and_changes_nothing(tmp_path, monkeypatch):
    """The transcript is read a page at a time (at most PAGE_ENTRIES updates each), never with
    the read-everything `statedb.history`; the read-only open leaves every file as it was."""
    state = str(tmp_path / "state")
    three_turns(state)
    before = files_of(state)
    pages: list[int] = []
    original = statedb.history_page

    def counted(*args, **kwargs):
        page = original(*args, **kwargs)
        pages.append(len(page.entries))
        return page

    def whole(*_args, **_kwargs):
        raise AssertionError("sessions show read the whole history at once")

    monkeypatch.setattr(statedb, "history_page", counted)
    monkeypatch.setattr(statedb, "history", whole)
    monkeypatch.setattr(report, "PAGE_ENTRIES", 64)
    show(state, "--full")
    assert max(pages) <= 64 and sum(pages) == 3 + LONG_REPLY // 13 + TOOL_CALLS
    assert files_of(state) == before


def test_a_turn_with_a_refused_piece_says_it_is_incomplete(tmp_path):
    state = str(tmp_path / "state")
    os.makedirs(state, mode=0o700)
    conn = statedb.connect(statedb.db_path(state))
    try:
        statedb.save_session(conn, SessionRecord("s", "/w"))
        statedb.begin_turn(conn, "s", "t", 1.0, [update("user_message_chunk", "hi", "u")])
        statedb.mark_incomplete(conn, "s", "t")
    finally:
        conn.close()
    heading = next(line for line in show(state).splitlines() if line.startswith("turn 1 "))
    assert heading.endswith(": no outcome (running, or its process ended first) [incomplete: some of its updates could not be stored]")


# -- `acp-green usage`: the totals, and the transcript `sessions show` prints ---------------------
def test_usage_report_sums_input_and_output_apart_and_orders_sessions_busiest_first(tmp_path):
    path = statedb.db_path(str(tmp_path / "state"))
    store = SqliteStore(path)
    store.record_usage(UsageRecord("b", "1", "end_turn", 1.0, 0.5, 10, 1000, input_tokens=3, output_tokens=4))
    store.record_usage(UsageRecord("a", "2", "cancelled", 2.0, 0.25, 20, 2000))
    store.record_usage(UsageRecord("a", "3", "end_turn", 3.0, 1.0, 30, 3000, input_tokens=5))
    store.record_usage(UsageRecord("c", "4", "end_turn", 4.0, 0.0, 0, 0))
    store.close()
    with report.open_database(str(tmp_path / "state")) as db:
        usage = report.usage_report(db, with_records=True)
    assert usage["totals"] == {
        "prompts": 4, "inputBytes": 60, "outputBytes": 6000, "inputTokens": 8, "outputTokens": 4,
        "durationSeconds": 1.75, "byStopReason": {"cancelled": 1, "end_turn": 3},
    }
    # Busiest first; sessions with as many prompts by id.
    assert [(s["sessionId"], s["prompts"], s["inputBytes"], s["outputBytes"]) for s in usage["sessions"]] == [
        ("a", 2, 50, 5000), ("b", 1, 10, 1000), ("c", 1, 0, 0)]
    assert len(usage["records"]) == 4
    table = report.usage_table(usage)
    assert table[0].split() == ["session", "prompts", "in", "bytes", "out", "bytes", "in", "tokens", "out", "tokens", "seconds"]
    assert table[-1].split() == ["TOTAL", "4", "60", "6000", "8", "4", "1.750"]


def test_the_transcript_shows_text_and_names_other_content_by_its_type():
    """A message chunk's text is shown as is; content that is not text shows as `[type]`."""
    history = [
        {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hello "}},
        {"sessionUpdate": "user_message_chunk", "content": {"type": "image", "data": "..."}},
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}},
        {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "read", "status": "pending"},
    ]
    transcript = report.Transcript()
    text = "".join([piece for update in history for piece in transcript.feed(update)] + list(transcript.end()))
    assert text == "user: hello [image]\nagent: hi\ntool_call: t1 read pending\n"
