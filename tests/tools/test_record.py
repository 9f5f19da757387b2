"""`acp-green record` through the real command line: a transparent proxy (every byte both ways, EOF,
signals, the exit status) that writes a trace of what passed, and `serve --trace`, the same trace
from inside the runtime."""

from __future__ import annotations

import base64
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from collections.abc import Callable
from typing import Any

import pytest

from acp_green.tools.trace.record import Recorder, RecordOptions
from tests.helpers import TESTS

RECORD = [sys.executable, "-m", "acp_green", "record"]
TRACE_AGENT = [sys.executable, str(TESTS / "trace_agents.py")]
SERVE = [sys.executable, "-m", "acp_green", "serve", "--ephemeral"]


def bounded(read: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """read() (a blocking read of a pipe), failing after `timeout` seconds instead of hanging.

    A plain thread join, not wait_until: the gevent hub must not run in these tests. Once any
    test in this worker used gevent.subprocess, gevent's SIGCHLD watcher reaps every child of
    the worker whenever the hub runs, and the stdlib's wait of the recorder then gets ECHILD and
    reports exit status 0. (A likely cause of one failure in a full parallel run: the recorder
    exited 0 though its agent was killed; not reproduced on its own.)"""
    result: list[Any] = []
    reader = threading.Thread(target=lambda: result.append(read()), daemon=True)
    reader.start()
    reader.join(timeout)
    if not result:
        pytest.fail(f"no {what} within {timeout:g}s")
    return result[0]


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_bytes().splitlines()]


def line_bytes(event: dict[str, Any]) -> bytes:
    raw = event["raw"].encode() if "raw" in event else base64.b64decode(event["raw_b64"])
    return raw + (b"\n" if event.get("newline", True) else b"")


def wire_bytes(trace: list[dict[str, Any]], sender: str) -> bytes:
    """Everything `sender` wrote, put back together from the trace."""
    return b"".join(line_bytes(e) for e in trace if e["type"] != "trace" and e["from"] == sender)


def stderr_lines_of_recorder(stderr: bytes) -> list[bytes]:
    return [line for line in stderr.splitlines() if line.startswith(b"acp-green record:")]


# -- the bytes both ways ---------------------------------------------------------------------------
CLIENT_SENDS = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n'
                b"\xff\xfe\xc3( invalid UTF-8\n"
                + b'{"jsonrpc":"2.0","method":"big","params":{"x":"' + b"y" * (5 << 20) + b'"}}\n'
                + b"\n\r\n[1,2]\n"
                + b"a last line without a newline")
AGENT_SENDS = (b'{"jsonrpc":"2.0","id":1,"result":{"ok":true}}\n'
               + b'{"jsonrpc":"2.0","method":"huge","params":{"z":"' + b"\xc3\xa9" * (3 << 20) + b'"}}\n'
               + b"\x80\x81 not UTF-8 either\n"
               + b'{"jsonrpc":"2.0","id":2,"error":{"code":-1,"message":"m"}}\n'
               + b"\x00 and no final newline \xff")


def run_bytes_agent(tmp_path: Path, name: str, record: list[str] | None) -> tuple[subprocess.CompletedProcess, bytes]:
    """The bytes agent run directly (`record` None) or behind the recorder; what each side received."""
    payload, received = tmp_path / "payload", tmp_path / f"received-{name}"
    payload.write_bytes(AGENT_SENDS)
    agent = [*TRACE_AGENT, "bytes", str(received), str(payload)]
    done = subprocess.run([*record, "--", *agent] if record is not None else agent, input=CLIENT_SENDS,
                          capture_output=True, timeout=120)
    return done, received.read_bytes()


def test_every_byte_passes_unchanged_both_ways_with_the_exit_status_and_stderr(tmp_path):
    """Invalid UTF-8, lines of several MiB, blank lines and last lines without a newline: each side
    receives exactly what it received without the recorder; the trace holds it all, line by line."""
    direct, direct_received = run_bytes_agent(tmp_path, "direct", None)
    trace = tmp_path / "t.jsonl"
    recorded, recorded_received = run_bytes_agent(tmp_path, "recorded", [*RECORD, "--out", str(trace)])
    assert direct_received == CLIENT_SENDS and direct.stdout == AGENT_SENDS and direct.returncode == 7
    assert recorded_received == direct_received
    assert recorded.stdout == direct.stdout
    assert recorded.returncode == direct.returncode == 7
    assert recorded.stderr == direct.stderr  # the agent's stderr, and nothing of ours
    written = events(trace)
    assert wire_bytes(written, "client") == CLIENT_SENDS
    assert wire_bytes(written, "agent") == AGENT_SENDS
    assert [e["seq"] for e in written] == list(range(len(written)))
    stamps = [e["ts"] for e in written]
    assert stamps == sorted(stamps)
    header, footer = written[0], written[-1]
    assert header["type"] == "trace" and header["component"] == "recorder"
    assert header["fields"]["format"] == "acp-green-trace/1" and header["fields"]["command"][-3] == "bytes"
    assert footer["fields"] == {"exit": 7, "signal": None}
    stderr_notes = [e["message"] for e in written if e["type"] == "trace" and e["component"] == "agent"]
    assert stderr_notes == ["a line on stderr", "\ufffd\ufffd not UTF-8"]
    kinds = [(e["type"], e["from"]) for e in written if e["type"] != "trace"]
    assert kinds[:2] == [("request", "client"), ("line", "client")]
    assert ("response", "agent") in kinds and ("notification", "client") in kinds
    last_client = [e for e in written if e["type"] == "line" and e["from"] == "client"][-1]
    assert last_client["newline"] is False and last_client["raw"] == "a last line without a newline"


def test_an_unwritable_trace_file_is_said_once_and_every_byte_still_passes(tmp_path):
    direct, direct_received = run_bytes_agent(tmp_path, "direct", None)
    for out in (tmp_path / "no such dir" / "t.jsonl", Path("/dev/full")):
        recorded, received = run_bytes_agent(tmp_path, "recorded", [*RECORD, "--out", str(out)])
        assert (received, recorded.stdout, recorded.returncode) == (direct_received, direct.stdout, 7), out
        ours = stderr_lines_of_recorder(recorded.stderr)
        assert len(ours) == 1 and b"cannot write the trace file" in ours[0], recorded.stderr
        assert recorded.stderr.replace(ours[0] + b"\n", b"") == direct.stderr


# -- EOF ---------------------------------------------------------------------------------------------
def test_the_end_of_each_stream_is_passed_on_by_itself(tmp_path):
    """The agent closing its stdout ends the client's input while both run on; the client closing
    its output ends the agent's input."""
    proc = subprocess.Popen([*RECORD, "--out", str(tmp_path / "t.jsonl"), "--", *TRACE_AGENT, "closes-stdout"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert bounded(proc.stdout.read, "EOF on stdout") == b"bye\n"  # while the agent still waits for its stdin
        assert proc.poll() is None
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
        assert proc.stderr is not None and bounded(proc.stderr.read, "stderr") == b"stdin ended\n"
    finally:
        proc.kill()
        proc.wait()


# -- signals -----------------------------------------------------------------------------------------
def start_recorded(tmp_path: Path, mode: str) -> tuple[subprocess.Popen, Path]:
    trace = tmp_path / "t.jsonl"
    proc = subprocess.Popen([*RECORD, "--out", str(trace), "--", *TRACE_AGENT, mode],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and bounded(proc.stdout.readline, "ready") == b"ready\n"
    return proc, trace


def test_signals_are_forwarded_and_the_exit_status_is_the_agents(tmp_path):
    proc, trace = start_recorded(tmp_path, "signals")
    try:
        assert proc.stderr is not None
        for signum in (signal.SIGHUP, signal.SIGINT, signal.SIGUSR1, signal.SIGWINCH):
            proc.send_signal(signum)
            assert bounded(proc.stderr.readline, "the agent's word") == f"got {signal.Signals(signum).name}\n".encode()
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 43
    finally:
        proc.kill()
        proc.wait()
    written = events(trace)
    assert written[-1]["fields"] == {"exit": 43, "signal": None}
    assert "forwarded SIGTERM to the agent" in [e.get("message") for e in written]


def tgkill(pid: int, tid: int, signum: int) -> None:
    """Send a signal to one thread of another process (glibc's tgkill)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.tgkill(pid, tid, signum) != 0:
        raise OSError(ctypes.get_errno(), "tgkill")


def test_a_signal_the_kernel_gives_to_one_of_the_recorders_threads_is_forwarded_at_once(tmp_path):
    """Any thread of a process may take a signal sent to it (the kernel picks one, and under load
    often not the main one). Python runs the handler in the main thread, which sat in waitpid until
    the agent exited: the signal was not forwarded then, and the agent never told to exit (the
    cause of a timeout of the test above under load). Each thread is sent one here."""
    proc, trace = start_recorded(tmp_path, "signals")
    try:
        assert proc.stderr is not None
        threads = sorted(int(tid) for tid in os.listdir(f"/proc/{proc.pid}/task") if int(tid) != proc.pid)
        assert len(threads) >= 3  # the three pumps, and the writer of the notes
        for tid in threads:
            tgkill(proc.pid, tid, signal.SIGWINCH)
            assert bounded(proc.stderr.readline, f"the agent's word for the signal thread {tid} took", 60) == b"got SIGWINCH\n"
        tgkill(proc.pid, threads[-1], signal.SIGTERM)
        assert bounded(proc.wait, "the recorder's exit", 60) == 43
    finally:
        proc.kill()
        proc.wait()
    assert events(trace)[-1]["fields"] == {"exit": 43, "signal": None}


def test_the_signal_handler_takes_no_lock(tmp_path):
    """A handler runs between two bytecodes of whatever the main thread runs, another run of
    itself included: had it waited for the trace's lock (to write its note), a signal arriving
    while the first handler held it would have stopped the main thread for good."""
    recorder = Recorder(RecordOptions(command=["sleep", "60"], out=str(tmp_path / "t.jsonl")))
    recorder.agent = subprocess.Popen(["sleep", "60"])
    try:
        with recorder.trace._lock:  # as the handler it interrupted would hold it
            forwarding = threading.Thread(target=recorder._forward, args=(signal.SIGCONT, None), daemon=True)
            forwarding.start()
            forwarding.join(60)
            assert not forwarding.is_alive(), "the handler waits for the trace's lock"
        assert recorder._notes.get_nowait() == "forwarded SIGCONT to the agent"  # written by the notes' own thread
    finally:
        recorder.agent.kill()
        recorder.agent.wait()


def test_a_burst_of_signals_is_forwarded_and_the_recorder_still_ends_with_the_agent(tmp_path):
    """Thousands of signals, then SIGTERM: each one handled as it comes (a handler may run inside
    another), the last one forwarded, and the recorder ends with its agent."""
    proc, trace = start_recorded(tmp_path, "signals")
    try:
        for _ in range(2000):
            proc.send_signal(signal.SIGWINCH)
        proc.send_signal(signal.SIGTERM)
        assert bounded(lambda: proc.wait(), "the recorder's exit", 120) == 43
    finally:
        proc.kill()
        proc.wait()
    written = events(trace)
    notes = [e.get("message") for e in written]
    assert written[-1]["fields"] == {"exit": 43, "signal": None}
    assert "forwarded SIGTERM to the agent" in notes and "forwarded SIGWINCH to the agent" in notes


def test_an_agent_ended_by_a_signal_gives_128_plus_its_number(tmp_path):
    proc, trace = start_recorded(tmp_path, "sleeps")
    try:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    assert events(trace)[-1]["fields"] == {"exit": None, "signal": "SIGTERM"}


# -- a crash mid-turn --------------------------------------------------------------------------------
def request(request_id: int, method: str, params: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode() + b"\n"


def test_an_agent_killed_mid_turn_leaves_every_event_up_to_its_death_in_the_trace(tmp_path):
    trace = tmp_path / "t.jsonl"
    proc = subprocess.Popen([*RECORD, "--out", str(trace), "--", *SERVE], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    received: list[bytes] = []
    try:
        proc.stdin.write(request(0, "initialize", {"protocolVersion": 1}) + request(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []}))
        proc.stdin.flush()
        assert b'"id":0' in bounded(proc.stdout.readline, "initialize's answer")
        session = json.loads(bounded(proc.stdout.readline, "session/new's answer"))["result"]["sessionId"]
        proc.stdin.write(request(2, "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "/stream 1000000 64"}]}))
        proc.stdin.flush()
        while len(received) < 200:  # the turn streams
            received.append(bounded(proc.stdout.readline, "an update"))
        agent_pid = events(trace)[0]["fields"]["pid"]
        os.kill(agent_pid, signal.SIGKILL)
        received.extend(bounded(proc.stdout.readlines, "EOF after the kill"))  # what the agent wrote before it died
        status = proc.wait(timeout=60)
        assert status == 128 + signal.SIGKILL, (status, events(trace)[-1])  # the footer says what the recorder saw
    finally:
        proc.kill()
        proc.wait()
    written = events(trace)
    sent = [line_bytes(e) for e in written if e["type"] != "trace" and e["from"] == "agent"]
    # Every line the client got, in order, after the two it read first, and nothing it did not get
    # (a line the agent died in the middle of is there as far as it got, marked as such).
    assert sent[2:] == received
    if not received[-1].endswith(b"\n"):
        assert [e for e in written if e["type"] == "line"][-1]["newline"] is False
    assert [e["method"] for e in written if e["type"] == "request"] == ["initialize", "session/new", "session/prompt"]
    assert written[-1]["fields"] == {"exit": None, "signal": "SIGKILL"}


# -- order and memory --------------------------------------------------------------------------------
def test_a_request_is_in_the_trace_before_the_answer_an_agent_gives_at_once(tmp_path):
    """8 MiB requests to an agent that answers each as soon as it has read it: each request is
    traced before its newline goes on, so before its answer, and `trace check` finds nothing."""
    trace = tmp_path / "t.jsonl"
    proc = subprocess.Popen([*RECORD, "--out", str(trace), "--", *TRACE_AGENT, "answers"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for request_id in range(1, 9):
            proc.stdin.write(request(request_id, "_test/big", {"text": "y" * (8 << 20)}))
            proc.stdin.flush()
            assert json.loads(bounded(proc.stdout.readline, f"the answer to #{request_id}"))["id"] == request_id
        proc.stdin.close()
        assert proc.wait(timeout=120) == 0
    finally:
        proc.kill()
        proc.wait()
    order = [(e["type"], e["id"]) for e in events(trace) if e["type"] in ("request", "response")]
    assert order == [(kind, n) for n in range(1, 9) for kind in ("request", "response")]
    checked = subprocess.run([sys.executable, "-m", "acp_green", "trace", "check", str(trace)], capture_output=True,
                             text=True, timeout=300)
    assert checked.returncode == 0 and "OK in 16 messages" in checked.stdout, checked.stdout


def peak_rss(pid: int) -> int:
    """The highest resident set size the process has had, in bytes (VmHWM)."""
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))


def trace_lines(path: Path) -> list[tuple[bytes, int]]:
    """Each line of a trace file as (its first 200 bytes, its length), read a MiB at a time (its
    lines may be longer than the memory a test should take)."""
    found: list[tuple[bytes, int]] = []
    head, length = b"", 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            for index, part in enumerate(chunk.split(b"\n")):
                if index:
                    found.append((head, length))
                    head, length = b"", 0
                head += part[:200 - len(head)]
                length += len(part)
    return found


def test_lines_of_a_hundred_mib_pass_and_are_traced_in_bounded_memory(tmp_path):
    """A 128 MiB line from the agent and a 64 MiB one from the editor at the same time go through,
    each traced whole (before its newline went on), while the recorder's peak RSS grows by less
    than 64 MiB (it held 5-10 times a line before: 2.9 GB for 300 MB)."""
    agent_line, client_text = 128 << 20, 64 << 20
    trace = tmp_path / "t.jsonl"
    proc = subprocess.Popen([*RECORD, "--out", str(trace), "--", *TRACE_AGENT, "long-lines", str(agent_line)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        assert bounded(proc.stdout.readline, "ready") == b"ready\n"
        before = peak_rss(proc.pid)
        proc.stdin.write(b"go\n")
        proc.stdin.flush()

        def send() -> bool:  # while the agent's line comes the other way
            assert proc.stdin is not None
            proc.stdin.write(request(1, "_test/long", {"text": ""})[:-4])  # up to the text's opening quote
            for _ in range(client_text >> 20):
                proc.stdin.write("\u00e9".encode() * (1 << 19))
            proc.stdin.write(b'"}}\n')
            proc.stdin.flush()
            return True

        sender = threading.Thread(target=send, daemon=True)
        sender.start()

        def received() -> int:  # the line's length, newline included
            assert proc.stdout is not None
            count = 0
            while not (piece := proc.stdout.read1(1 << 20)).endswith(b"\n"):
                count += len(piece)
            return count + len(piece)

        assert bounded(received, "the agent's long line", 600) == agent_line + 1
        sender.join(600)
        said = bounded(proc.stdout.readline, "the agent's word that the client's line arrived", 600)
        assert said == f"got {len(request(1, '_test/long', {'text': ''})) - 4 + client_text + 3}\n".encode()
        grown = peak_rss(proc.pid) - before
        proc.stdin.close()
        assert proc.wait(timeout=120) == 0
    finally:
        proc.kill()
        proc.wait()
    assert grown < 64 << 20, f"the recorder's peak RSS grew by {grown >> 20} MiB"
    wire = [(json.loads(head[:head.index(b',"to"')] + b"}"), length) for head, length in trace_lines(trace)
            if b'"type":"trace"' not in head and length > 1 << 20]  # not the lines ready, go and got
    assert sorted((event["type"], event["from"]) for event, _length in wire) == [("notification", "agent"), ("request", "client")]
    for event, length in wire:  # the text twice (params and raw), é escaped (\u00e9: 6 bytes for 2)
        assert length > 2 * (agent_line if event["from"] == "agent" else 3 * client_text), (event, length)


# -- serve --trace -----------------------------------------------------------------------------------
def comparable(trace: list[dict[str, Any]], sender: str) -> list[dict[str, Any]]:
    return [{k: v for k, v in e.items() if k not in ("ts", "seq")} for e in trace
            if e["type"] != "trace" and e["from"] == sender]


def test_serve_trace_writes_the_events_record_writes_for_the_same_session(tmp_path):
    """One session, traced from outside (record) and from inside (serve --trace) at once."""
    outside, inside = tmp_path / "outside.jsonl", tmp_path / "inside.jsonl"
    proc = subprocess.Popen([*RECORD, "--out", str(outside), "--", *SERVE, "--trace", str(inside)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(request(0, "initialize", {"protocolVersion": 1}) + request(1, "session/new", {"cwd": str(tmp_path), "mcpServers": []}))
        proc.stdin.flush()
        bounded(proc.stdout.readline, "initialize's answer")
        session = json.loads(bounded(proc.stdout.readline, "session/new's answer"))["result"]["sessionId"]
        proc.stdin.write(request(2, "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "/stream 50 8"}]})
                         + b"\xff not UTF-8\n" + b'{"jsonrpc":"2.0","id":3,"method":"nope"}')
        proc.stdin.close()
        bounded(proc.stdout.read, "EOF")
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait()
    recorded, served = events(outside), events(inside)
    for sender in ("client", "agent"):
        assert comparable(served, sender) == comparable(recorded, sender), sender
    assert len(comparable(served, "agent")) > 50
    assert served[0]["component"] == "runtime" and served[0]["fields"]["format"] == "acp-green-trace/1"
    assert served[-1]["fields"] == {"exit": 0, "signal": None}
    assert comparable(served, "client")[-1]["newline"] is False


def test_serve_with_an_unwritable_trace_says_so_once_and_serves(tmp_path):
    done = subprocess.run([*SERVE, "--trace", str(tmp_path / "missing" / "t.jsonl")],
                          input=request(0, "initialize", {"protocolVersion": 1}), capture_output=True, timeout=120)
    assert done.returncode == 0 and json.loads(done.stdout)["result"]["protocolVersion"] == 1
    assert done.stderr.count(b"cannot write the trace file") == 1, done.stderr


def test_serve_trace_notes_a_line_it_skipped_unread_and_the_signal_that_stopped_it(tmp_path):
    trace = tmp_path / "t.jsonl"
    proc = subprocess.Popen([*SERVE, "--max-line-bytes", "1024", "--trace", str(trace)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(b"x" * 5000 + b"\n" + request(0, "initialize", {"protocolVersion": 1}))
        proc.stdin.flush()
        assert b"-32600" in bounded(proc.stdout.readline, "the long line's refusal")
        assert b'"id":0' in bounded(proc.stdout.readline, "initialize's answer")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        proc.wait()
    written = events(trace)
    assert [e["type"] for e in written] == ["trace", "trace", "response", "request", "response", "trace"]
    assert written[1]["level"] == "warn" and "longer than 1024 bytes was skipped" in written[1]["message"]
    assert written[-1]["fields"] == {"exit": 0, "signal": "SIGTERM"}


def test_an_agent_that_cannot_start_is_said_in_one_line_with_the_shells_status(tmp_path):
    trace = tmp_path / "t.jsonl"
    done = subprocess.run([*RECORD, "--out", str(trace), "--", str(tmp_path / "no-such-agent")], input=b"",
                          capture_output=True, timeout=120)
    assert done.returncode == 127 and done.stdout == b""
    assert done.stderr.count(b"\n") == 1 and b"cannot start" in done.stderr
    assert events(trace)[-1]["fields"] == {"exit": None, "signal": None}


def test_out_and_out_dir_together_are_refused_before_anything_starts(tmp_path):
    done = subprocess.run([*RECORD, "--out", str(tmp_path / "t.jsonl"), "--out-dir", str(tmp_path), "--", *TRACE_AGENT, "sleeps"],
                          input=b"", capture_output=True, timeout=120)
    assert done.returncode == 2 and b"cannot be given together" in done.stderr and done.stdout == b""
    assert list(tmp_path.iterdir()) == []
