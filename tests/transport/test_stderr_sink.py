"""An unread stderr never freezes the agent: the stderr sink, alone and in `serve`."""

from __future__ import annotations

import array
import fcntl
import os
import sys
import termios

import pytest

from acp_green.process.stderrsink import SinkTextStream, StderrSink
from acp_green.rpc.transport import read_chunks

# Runs `acp-green serve ARGS` with fd 2 on a fresh pipe whose read end the agent itself keeps
# open (at fd 9) and never reads: the pipe fills, and a blocking write to it never returns.
UNREAD_STDERR_LAUNCHER = """
import os, sys
read_end, write_end = os.pipe()
os.dup2(read_end, 9)
os.dup2(write_end, 2)
os.close(read_end)
os.close(write_end)
os.execv(sys.executable, [sys.executable, "-m", "acp_green", "serve", *sys.argv[1:]])
"""
STDERR_READ_END = 9
PIPE_CAPACITY = 64 << 10


def pipe_fill(pid: int) -> int:
    """Bytes waiting in the agent's unread stderr pipe (opened through /proc, not read)."""
    fd = os.open(f"/proc/{pid}/fd/{STDERR_READ_END}", os.O_RDONLY | os.O_NONBLOCK)
    try:
        count = array.array("i", [0])
        fcntl.ioctl(fd, termios.FIONREAD, count)
        return count[0]
    finally:
        os.close(fd)


@pytest.mark.parametrize("patching", [("--no-monkey-patch",), ()], ids=["plain", "monkey-patched"])
def test_agent_whose_stderr_is_never_read_answers_everything_and_exits(launch, patching):
    """Stderr: with a stderr pipe nobody reads, hundreds of failing turns — each
    logging a traceback, printing, warning and letting the hub report a dead greenlet — and
    malformed notifications are all answered; then EOF ends the process with exit 0. Patched
    (the default) too: the sink's thread must stay a real thread."""
    agent = launch(command=[sys.executable, "-c", UNREAD_STDERR_LAUNCHER, "--ephemeral", "--log-level", "DEBUG",
                            "--agent", "tests.agents:StderrFloodAgent", *patching])
    agent.initialize()
    sid = agent.new_session()
    turns = 300
    for n in range(turns):
        agent.notify("session/cancel", {"sessionId": n})  # malformed: logged at WARNING
        agent.send_raw(b'{"jsonrpc":"2.0","method":"session/cancel","params":[' + b"1," * 200 + b'1]}\n')
        error = agent.prompt(sid, f"turn {n}").error()
        assert error["code"] == -32603 and "fails" in error["message"]
    assert pipe_fill(agent.pid) > PIPE_CAPACITY // 2, "the test must fill the stderr pipe to mean anything"
    assert [s["sessionId"] for s in agent.call("session/list", {})["sessions"]] == [sid]
    assert agent.initialize()["protocolVersion"] == 1
    agent.close_input()
    assert agent.wait_exit(timeout=60) == 0


def test_sink_drops_what_does_not_fit_and_says_so_once_the_pipe_drains():
    """Stderr: a write never blocks; past the capacity it is dropped and counted, and
    a line saying how much was dropped arrives once the reader reads again."""
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, 1031, 4096)  # F_SETPIPE_SZ: a one-page pipe fills at once
    sink = StderrSink(write_end, capacity=16 << 10)
    stream = SinkTextStream(sink, "<test>")
    try:
        for n in range(200):  # 200 x 1 KiB against 4 KiB of pipe and 16 KiB of buffer
            stream.write(f"{n:04d}" + "x" * 1019 + "\n")
        assert sink.dropped_writes_total > 100
        assert not sink.flush(timeout=0.5), "a flush must give up on a reader that does not read"
        received = bytearray()
        for chunk in read_chunks(read_end):
            received.extend(chunk)
            if b"were dropped" in received:
                break
        text = received.decode()
        assert text.startswith("0000x")
        kept = [line for line in text.splitlines() if not line.startswith("acp-green:")]
        assert all(len(line) == 1023 for line in kept)  # whole writes or nothing: no torn lines
        dropped = 200 - len(kept)
        assert f"{dropped} writes ({dropped * 1024} bytes) were dropped" in text
        assert sink.flush(timeout=30)
    finally:
        os.close(write_end)
        os.close(read_end)


def test_sink_stream_is_a_usable_stderr():
    """Stderr: the replacement streams accept what code writes to sys.stderr/stdout."""
    read_end, write_end = os.pipe()
    sink = StderrSink(write_end)
    stream = SinkTextStream(sink, "<stderr>")
    try:
        print("caf\udce9 printed", file=stream)
        stream.buffer.write(b"raw bytes\n")
        stream.flush()
        assert stream.fileno() == write_end and stream.writable() and not stream.isatty()
        assert sink.flush(timeout=30)
        data = b""
        while data.count(b"\n") < 2:  # flushed: it is all in the pipe already
            data += os.read(read_end, 4096)
        assert data == b"caf\\udce9 printed\nraw bytes\n"
    finally:
        os.close(write_end)
        os.close(read_end)
