"""Chat shows each line as it comes and keeps only the last ones: an agent that floods 500 MB in one
turn costs chat a bounded amount of memory (it kept every line before: 2.7 GB in 20 s)."""

from __future__ import annotations

import subprocess
import sys
import threading

CHAT = [sys.executable, "-m", "acp_green", "chat", "--ephemeral"]
CHUNKS, CHUNK = 5000, 100_000  # 500 MB in one turn
BOUND = 600  # generous: only decides when a broken chat stops being waited for


def status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


def read_until(stream, ending: bytes) -> int:
    """Read `stream` until what was read ends with `ending` (or it ends); how many bytes were read."""
    seen, count = b"", 0
    while not seen.endswith(ending):
        piece = stream.read1(1 << 20)
        if not piece:
            raise AssertionError(f"the output ended before {ending!r}")
        count += len(piece)
        seen = (seen + piece)[-len(ending):]
    return count


def bounded(work, what: str) -> int:
    found: list[int] = []
    reader = threading.Thread(target=lambda: found.append(work()), daemon=True)
    reader.start()
    reader.join(BOUND)
    assert found, f"no {what} within {BOUND}s"
    return found[0]


def test_a_turn_that_floods_500_mb_costs_chat_a_bounded_memory():
    chat = subprocess.Popen(CHAT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert chat.stdin is not None and chat.stdout is not None
    try:
        bounded(lambda: read_until(chat.stdout, b"> "), "prompt")
        before = status_kib(chat.pid, "VmRSS")
        chat.stdin.write(f"/stream {CHUNKS} {CHUNK}\n".encode())
        chat.stdin.flush()
        shown = bounded(lambda: read_until(chat.stdout, b"[end_turn]\n> "), "end of the turn")
        grown = (status_kib(chat.pid, "VmHWM") - before) << 10
        chat.stdin.close()
        assert chat.wait(timeout=BOUND) == 0
    finally:
        chat.kill()
        chat.wait()
    assert shown > CHUNKS * CHUNK  # every chunk was shown
    assert grown < 64 << 20, f"chat's peak RSS grew by {grown >> 20} MiB while 500 MB passed"
