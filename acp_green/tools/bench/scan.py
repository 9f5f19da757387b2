"""Lazy scanning of an agent's output: count chunks without decoding each line.

At 200k+ lines a second, a `json.loads` per line (microseconds each, plus the objects it
builds) would make the client the bottleneck. So the hot path does three C-level bytes
searches per block read: it counts `"agent_message_chunk"` marks, and looks for `"result"` /
`"error"`, which only responses contain here; only those lines are decoded (to match the
response to its request by id). Chunk order is checked after the timed window, from the kept
blocks, with one regex that pulls (sessionId, index) out of each chunk line: every chunk's text
starts with `i:`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

CHUNK_MARK = b'"agent_message_chunk"'
RESPONSE_MARKS = (b'"result"', b'"error"')
# ACP v2 ends a prompt with an idle `state_update` (its response is only an acknowledgement).
STATE_MARK = b'"state_update"'
# sessionId precedes the update in every agent measured (acp_green, both SDKs, the bare loop);
# a line where it does not is checked through the slow path below.
CHUNK_RE = re.compile(rb'"sessionId":\s*"([^"\\]*)"[^\n]*"text":\s*"(\d+):')


@dataclass(slots=True)
class StreamCheck:
    """One session's chunk stream as checked after the fact: count and disorder."""

    chunks: int = 0
    out_of_order: int = 0


@dataclass
class Validation:
    """The outcome of checking kept output: per-session streams and lines that did not parse."""

    streams: dict[str, StreamCheck] = field(default_factory=dict)
    bad_lines: int = 0
    complete: bool = True  # False when the keep limit was hit and later output was not kept

    def chunks_of(self, session_id: str) -> int:
        """How many chunks arrived for a session."""
        check = self.streams.get(session_id)
        return check.chunks if check else 0

    def in_order(self) -> bool:
        """True when every session's chunk indices ran 0, 1, 2, ... with no gap."""
        return self.bad_lines == 0 and all(s.out_of_order == 0 for s in self.streams.values())


class Scanner:
    """Feeds on raw bytes; counts chunks, hands responses to a callback, keeps blocks to check."""

    def __init__(self, on_response: Callable[[dict[str, Any], float, int], None], keep_limit: int = 0,
                 on_state: Callable[[dict[str, Any], float, int], None] | None = None) -> None:
        self.on_response = on_response  # (message, time read, byte offset of its line in the output)
        self.on_state = on_state  # the same, for each `state_update` notification (ACP v2)
        self.chunks = 0
        self.bytes = 0
        self.scanned = 0  # bytes of complete lines scanned so far
        self.keep_limit = keep_limit
        self.kept: list[bytes] = []
        self.kept_bytes = 0
        self.keep_overflow = False
        self.bad_lines = 0
        self._carry = b""

    def feed(self, data: bytes, now: float) -> None:
        """Take the next bytes read from the agent, at time `now`."""
        self.bytes += len(data)
        if self._carry:
            data = self._carry + data
        cut = data.rfind(b"\n")
        if cut < 0:
            self._carry = data
            return
        if cut + 1 == len(data):
            self._carry = b""
        else:
            self._carry = data[cut + 1 :]
            data = data[: cut + 1]
        self.scan_block(data, now)

    def scan_block(self, block: bytes, now: float) -> None:
        """Account for a block of complete lines."""
        self.chunks += block.count(CHUNK_MARK)
        for mark in RESPONSE_MARKS:
            for start, end in lines_marked(block, mark):
                self._decode(block[start:end], now, self.scanned + start)
        if self.on_state is not None:
            for start, end in lines_marked(block, STATE_MARK):
                self._decode_state(block[start:end], now, self.scanned + start)
        self.scanned += len(block)
        if self.keep_limit:
            if self.kept_bytes + len(block) <= self.keep_limit:
                self.kept.append(block)
                self.kept_bytes += len(block)
            else:
                self.keep_overflow = True

    def _decode(self, line: bytes, now: float, position: int) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            self.bad_lines += 1
            return
        # A line holding both marks is decoded twice; only the first sighting counts.
        if isinstance(message, dict) and "method" not in message and "id" in message:
            self.on_response(message, now, position)

    def _decode_state(self, line: bytes, now: float, position: int) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            self.bad_lines += 1
            return
        if isinstance(message, dict) and message.get("method") == "session/update" and self.on_state is not None:
            self.on_state(message, now, position)

    def validate(self) -> Validation:
        """Check the kept output: chunk counts and `i:` order per session."""
        result = Validation(complete=not self.keep_overflow)
        for block in self.kept:
            check_block(block, result)
        return result


def lines_marked(block: bytes, mark: bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of each line of `block` (complete lines) that holds `mark`, found by bytes search."""
    at = block.find(mark)
    while at >= 0:
        start = block.rfind(b"\n", 0, at) + 1
        end = block.find(b"\n", at)
        yield start, end
        at = block.find(mark, end)


def check_block(block: bytes, result: Validation) -> None:
    """Add one block's chunk lines to `result`, by the regex or, if it misses any, line by line."""
    found = CHUNK_RE.findall(block)
    pairs: Iterable[tuple[str, int]]
    if len(found) == block.count(CHUNK_MARK):
        pairs = ((sid.decode(), int(index)) for sid, index in found)
    else:
        pairs = _parse_chunk_lines(block, result)
    streams = result.streams
    for sid, index in pairs:
        check = streams.get(sid)
        if check is None:
            check = streams[sid] = StreamCheck()
        if index != check.chunks:
            check.out_of_order += 1
        check.chunks += 1


def _parse_chunk_lines(block: bytes, result: Validation) -> list[tuple[str, int]]:
    pairs = []
    for line in block.split(b"\n"):
        if CHUNK_MARK not in line:
            continue
        try:
            params = json.loads(line)["params"]
            pairs.append((params["sessionId"], int(params["update"]["content"]["text"].split(":", 1)[0])))
        except (ValueError, KeyError, TypeError, IndexError):
            result.bad_lines += 1
    return pairs
