"""`acp-green bench`: its output is well formed (a smoke run), and its lazy scanner counts right.

Benchmarks are not tests: nothing here asserts on a timing, only on shapes and counts.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.tools.bench.scan import Scanner
from acp_green.tools.bench.stats import percentile, summarize
from acp_green.tools.bench.workloads import Sizes

WORKLOAD_METRICS = {
    "W1": {"chunks_per_s", "seconds", "valid", "agent_cpu_us_per_chunk", "agent_cpu_share", "client_cpu_share"},
    "W2": {"chunks_per_s", "ping_p50_ms", "ping_p99_ms", "pings_sent", "pings_answered_while_streaming", "valid", "ping_behind_kib_p50",
           "agent_cpu_us_per_chunk", "agent_cpu_share", "client_cpu_share"},
    "W3": {"cancel_p50_ms", "cancel_p99_ms", "cancel_max_ms", "cancel_behind_kib_p50", "streams_running", "all_streams_running"},
    "W4": {"rtt_p50_ms", "rtt_p99_ms"},
    "W5": {"init_ms"},
    "W6": {"idle_mib", "after_mib", "per_session_kib"},
    "W7": {"replay_updates_per_s", "replay_seconds", "replayed_chunks", "ping_p50_ms", "ping_p99_ms", "pings_answered_during_replay",
           "opening_ping_max_ms", "pings_before_first_update"},
    "W8": {"acp_p50_ms", "acp_p99_ms", "stdio_p50_ms", "stdio_p99_ms", "http_p50_ms", "http_p99_ms", "no_tool_p50_ms",
           "no_tool_p99_ms", "sdk_direct_p50_ms", "sdk_direct_p99_ms"},
}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def test_bench_smoke_writes_well_formed_json(tmp_path: Path) -> None:
    """A tiny run on acp-green alone: every workload reports every metric as a number."""
    out = tmp_path / "bench.json"
    agent = f"acp-green={sys.executable} -m acp_green serve --ephemeral"
    proc = subprocess.run(
        [sys.executable, "-m", "acp_green", "bench", "--agent", agent, "--repeat", "1", "--scale", "0.005", "--json", str(out)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    for key in ("format", "started", "finished", "commit", "machine", "load_before", "load_after", "sizes", "agents", "results", "client_ceiling", "failures"):
        assert key in report, key
    assert report["failures"] == []
    assert [a["name"] for a in report["agents"]] == ["acp-green"]
    assert _number(report["machine"]["nproc"]) and report["machine"]["cpu_model"]
    results = report["results"]["acp-green"]
    assert set(results) == set(WORKLOAD_METRICS)
    for workload, metrics in WORKLOAD_METRICS.items():
        assert set(results[workload]) == metrics, workload
        for name, summary in results[workload].items():
            assert set(summary) >= {"median", "min", "max", "spread", "runs"}
            assert len(summary["runs"]) == 1, (workload, name, summary)
            if workload == "W7" and name in ("ping_p50_ms", "ping_p99_ms") and results["W7"]["pings_answered_during_replay"]["median"] == 0:
                # At this scale the replay lasts a few ms: under load no ping may fall inside it,
                # and a latency of no pings is reported as not measured, never as a number.
                assert summary["median"] is None, (workload, name, summary)
                continue
            assert _number(summary["median"]), (workload, name, summary)
    assert results["W1"]["valid"]["median"] == 1 and results["W2"]["valid"]["median"] == 1
    assert results["W7"]["replayed_chunks"]["median"] == round(Sizes().w7_chunks * 0.005)  # the whole stored stream
    assert [(c["sessions"], c["write_bytes"]) for c in report["client_ceiling"]] == [(1, 0), (32, 0), (1, 8192)]
    assert all(_number(c["read_chunks_per_s"]) and c["valid"] for c in report["client_ceiling"])
    assert "W1 stream, chunks/s" in proc.stdout  # the table went to stdout


def _chunk(sid: str, index: int, spaced: bool = False) -> bytes:
    if spaced:  # key order and spacing of another serializer
        return (f'{{"jsonrpc": "2.0", "method": "session/update", "params": {{"sessionId": "{sid}", "update": '
                f'{{"content": {{"text": "{index}:....", "type": "text"}}, "sessionUpdate": "agent_message_chunk"}}}}}}\n').encode()
    return (f'{{"jsonrpc":"2.0","method":"session/update","params":{{"sessionId":"{sid}","update":'
            f'{{"sessionUpdate":"agent_message_chunk","content":{{"type":"text","text":"{index}:...."}}}}}}}}\n').encode()


def test_scanner_counts_chunks_matches_responses_and_checks_order() -> None:
    responses: list[dict[str, Any]] = []
    positions: list[int] = []
    scanner = Scanner(lambda message, now, position: (responses.append(message), positions.append(position)), keep_limit=1 << 20)
    data = b"".join(_chunk(f"s{i % 3}", i // 3, spaced=i % 2 == 1) for i in range(30))
    data += b'{"jsonrpc":"2.0","id":7,"result":{"stopReason":"end_turn"}}\n'
    data += b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s0","update":{"sessionUpdate":"usage_update","used":1,"size":2}}}\n'
    data += b'{"jsonrpc":"2.0","id":8,"error":{"code":-32000,"message":"busy"}}\n'
    for start in range(0, len(data), 37):  # reads that cut lines anywhere
        scanner.feed(data[start : start + 37], 1.0)
    assert scanner.chunks == 30
    assert [m["id"] for m in responses] == [7, 8]
    assert [data[p : p + 17] for p in positions] == [b'{"jsonrpc":"2.0",'] * 2 and positions[0] < positions[1]
    check = scanner.validate()
    assert check.in_order() and check.complete
    assert {sid: check.chunks_of(sid) for sid in ("s0", "s1", "s2")} == {"s0": 10, "s1": 10, "s2": 10}


def test_scanner_sees_a_gap_and_a_line_the_regex_misses() -> None:
    scanner = Scanner(lambda message, now, position: None, keep_limit=1 << 20)
    scanner.feed(_chunk("a", 0) + _chunk("a", 2), 0.0)  # chunk 1 missing
    # update before sessionId: the regex cannot pair it, the line-by-line path still does
    scanner.feed(b'{"params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"text":"0:x"}},"sessionId":"b"}}\n', 0.0)
    check = scanner.validate()
    assert not check.in_order()
    assert check.streams["a"].out_of_order == 1 and check.chunks_of("b") == 1


def test_percentiles_and_summary() -> None:
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile(list(range(101)), 99) == 99.0
    assert math.isnan(percentile([], 50))
    summary = summarize([4.0, 2.0, 3.0])
    assert (summary.median, summary.low, summary.high) == (3.0, 2.0, 4.0)


def _percentile_as_hand_written_before(values: list[float], q: float) -> float:
    """The oracle: linear interpolation at (n - 1) * q / 100, as the bench computed it before."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    low = math.floor(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def test_percentile_figures_on_known_inputs() -> None:
    """The figures the bench reported before the standard library computed them."""
    assert percentile([10.0, 20.0, 30.0, 40.0], 50) == 25.0
    assert percentile([10.0, 20.0, 30.0, 40.0], 99) == pytest.approx(39.7)
    assert percentile([5.0], 99) == 5.0
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 100.0], 99) == pytest.approx(91.81)
    with pytest.raises(ValueError):
        percentile([1.0, 2.0], 100)


@settings(deadline=None, max_examples=150)
@given(st.lists(st.floats(min_value=-1e12, max_value=1e12, allow_nan=False), min_size=1, max_size=60),
       st.integers(min_value=1, max_value=99))
def test_percentile_gives_the_figures_it_gave_when_hand_written(values: list[float], q: int) -> None:
    """Standard library: statistics.quantiles gives the same percentiles (to rounding)."""
    scale = max(1.0, *(abs(v) for v in values))
    assert percentile(values, q) == pytest.approx(_percentile_as_hand_written_before(values, q), rel=1e-12, abs=1e-12 * scale)


@settings(deadline=None, max_examples=200)
@given(st.lists(st.floats(min_value=-1e12, max_value=1e12, allow_nan=False), min_size=1, max_size=60))
def test_the_summary_median_is_the_50th_percentile_as_before(values: list[float]) -> None:
    scale = max(1.0, *(abs(v) for v in values))
    assert summarize(values).median == pytest.approx(_percentile_as_hand_written_before(values, 50), rel=1e-12, abs=1e-12 * scale)


def test_w7_tells_pings_sent_before_the_first_update_from_those_during_the_replay() -> None:
    """A ping sent before the first replayed update was read counts as before it even when its
    answer came after the load's; one sent later counts as during the replay only if answered
    before the load; unanswered pings count nowhere."""
    from acp_green.tools.bench.acp_only import split_pings
    from acp_green.tools.bench.conn import Call

    def call(ident: int, chunks: int, pos: int | None) -> Call:
        return Call(ident, "session/set_mode", 0.0, chunks_at_send=chunks, answered_pos=pos or 0,
                    response=None if pos is None else {"result": {}})

    load = call(0, 5, 1000)
    early, early_late, unanswered = call(1, 5, 100), call(2, 5, 2000), call(3, 5, None)
    during, after = call(4, 9, 500), call(5, 9, 3000)
    opening, replaying = split_pings([early, early_late, unanswered, during, after], 5, load)
    assert [c.id for c in opening] == [1, 2]
    assert [c.id for c in replaying] == [4]
