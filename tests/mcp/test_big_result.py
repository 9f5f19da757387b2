"""A big MCP tool result over stdio is held as few times as its decoding needs: the framer joins a
long line once, the decoder empties the line's bytes once it has their text (wire.decode of a
bytearray), and the link keeps nothing of it once the reply is handed over."""

from __future__ import annotations

import gc
import sys
import tracemalloc

from acp_green.mcp.client import McpClientSession, StdioChannel
from acp_green.mcp.jsonrpc import JsonRpcLink
from tests.mcp_helpers import RECORDER

SIZE = 24_000_000


def test_a_big_tool_result_peaks_at_twice_its_size_and_is_held_once():
    """A 24 MB text result: traced memory peaks under 2.5 x its size while it is read and decoded
    (3 x before: the line's bytes, its text and the value at once) and the link holds nothing of
    it afterwards (the last line's bytes stayed alive until the next line before)."""
    link = JsonRpcLink([sys.executable, RECORDER], name="big")
    try:
        session = McpClientSession("big", StdioChannel(link))
        session.initialize(timeout=30)
        gc.collect()
        tracemalloc.start()
        try:
            result = session.call_tool("big", {"size": SIZE}, timeout=60)
            held, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert len(result["content"][0]["text"]) == SIZE
        assert peak < 2.5 * SIZE, f"peak {peak / SIZE:.2f} x the result"
        assert held < 1.5 * SIZE, f"{held / SIZE:.2f} x the result still held"
    finally:
        link.close()
