"""Workloads W1–W6: one function per workload, each on a fresh agent process.

Agents run as users run them: with Python's bytecode cache (PYTHONDONTWRITEBYTECODE is dropped
from their environment), so start-up (W5) measures the program, not its compilation.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import gevent
from gevent.event import Event

from .conn import AgentConn, AgentFailed, Call
from .procmem import tree_cpu_seconds, tree_rss_bytes
from .stats import percentile

Metrics = dict[str, float]
KEEP_FOR_CHECK = 64 << 20  # bytes of output kept to check chunk order after the timed window
CHUNK_LINE_BYTES = 512  # more than any agent's line for a 64-byte chunk (message ids included)
AGENT_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


@dataclass(frozen=True)
class Sizes:
    """The workloads' parameters; the defaults are the sizes docs/BENCHMARKS.md reports."""

    chunk_size: int = 64
    w1_chunks: int = 20_000
    w2_prompts: int = 32
    w2_chunks: int = 20_000  # per prompt: long enough for >= 300 pings while streaming
    w2_ping_interval: float = 0.002
    w3_streams: int = 16
    w3_waiters: int = 16
    w3_chunks: int = 50_000
    w3_settle: float = 0.1
    w4_round_trips: int = 2_000
    w5_starts: int = 3  # measured starts per round (after one unmeasured start)
    w6_sessions: int = 1_000
    w7_chunks: int = 100_000
    w8_calls: int = 200
    settle: float = 0.5  # pause before reading RSS, so start-up work has finished
    timeout: float = 300.0
    read_pause: float = 0.0  # seconds the client sleeps before each read (calibration experiments)
    protocol: int = 1  # the ACP version the client asks for (2: the v2 draft, where the agent serves it)

    def scaled(self, scale: float) -> "Sizes":
        """Chunk counts, round trips and sessions times `scale` (concurrency stays as is)."""
        def s(n: int) -> int:
            return max(1, round(n * scale))

        return replace(self, w1_chunks=s(self.w1_chunks), w2_chunks=s(self.w2_chunks), w3_chunks=s(self.w3_chunks),
                       w4_round_trips=s(self.w4_round_trips), w6_sessions=s(self.w6_sessions),
                       w7_chunks=s(self.w7_chunks), w8_calls=s(self.w8_calls),
                       settle=min(self.settle, max(0.05, self.settle * scale)))


def w1_stream(command: Sequence[str], sizes: Sizes) -> Metrics:
    """W1: one prompt streaming N chunks; chunks/s from writing the prompt to reading its response."""
    with AgentConn(command, keep_limit=KEEP_FOR_CHECK, read_pause=sizes.read_pause, env=AGENT_ENV, protocol_version=sizes.protocol) as conn:
        conn.initialize(sizes.timeout)
        (sid,) = conn.new_sessions(1)
        cpu = _CpuMeter(conn.pid)
        call = conn.send("session/prompt", conn.prompt_params(sid, f"/stream {sizes.w1_chunks} {sizes.chunk_size}"))
        conn.wait(call, sizes.timeout)
        agent_cpu, client_cpu = cpu.stop()
        check = conn.scanner.validate()
        ok = check.in_order() and check.chunks_of(sid) == sizes.w1_chunks
        return {"chunks_per_s": sizes.w1_chunks / call.latency, "seconds": call.latency, "valid": float(ok),
                "agent_cpu_us_per_chunk": agent_cpu / sizes.w1_chunks * 1e6, "agent_cpu_share": agent_cpu / call.latency,
                "client_cpu_share": client_cpu / call.latency}


def w2_fanout(command: Sequence[str], sizes: Sizes) -> Metrics:
    """W2: many prompts streaming at once while `session/set_mode` pings an idle session."""
    # All of the output is kept for the order check: 32 streams of 20,000 chunks exceed KEEP_FOR_CHECK.
    keep = max(KEEP_FOR_CHECK, sizes.w2_prompts * sizes.w2_chunks * CHUNK_LINE_BYTES)
    with AgentConn(command, keep_limit=keep, read_pause=sizes.read_pause, env=AGENT_ENV, protocol_version=sizes.protocol) as conn:
        conn.start_reader()
        conn.initialize(sizes.timeout)
        idle, *streams = conn.new_sessions(sizes.w2_prompts + 1)
        done = Event()
        remaining = [sizes.w2_prompts]

        def on_response(call: Call) -> None:
            if call.method == "session/prompt":
                remaining[0] -= 1
                if not remaining[0]:
                    done.set()

        conn.on_response = on_response
        text = f"/stream {sizes.w2_chunks} {sizes.chunk_size}"
        cpu = _CpuMeter(conn.pid)
        prompts = conn.send_many([("session/prompt", conn.prompt_params(s, text)) for s in streams])
        pings: list[Call] = []
        pinger = gevent.spawn(ping_until, conn, idle, sizes.w2_ping_interval, done, pings)
        for call in prompts:
            conn.wait(call, sizes.timeout)
        pinger.join(timeout=5)
        pinger.kill()
        ended = max(call.answered_at for call in prompts)
        agent_cpu, client_cpu = cpu.stop()
        last_response = max(call.answered_pos for call in prompts)
        for call in pings:
            try:
                conn.wait(call, 30.0)
            except AgentFailed:
                pass
        answered = [c for c in pings if c.done]
        rtts = [c.latency * 1000 for c in answered]
        ahead = [c.queued_ahead / 1024 for c in answered]
        check = conn.scanner.validate()
        ok = check.in_order() and all(check.chunks_of(s) == sizes.w2_chunks for s in streams)
        total = sizes.w2_prompts * sizes.w2_chunks
        wall = ended - prompts[0].sent_at
        return {
            "chunks_per_s": total / wall,
            "ping_p50_ms": percentile(rtts, 50),
            "ping_p99_ms": percentile(rtts, 99),
            "pings_sent": float(len(pings)),
            "ping_behind_kib_p50": percentile(ahead, 50),
            # By position in the output, not by read time: a read can hold many lines.
            "pings_answered_while_streaming": float(sum(1 for c in answered if c.answered_pos < last_response)),
            "valid": float(ok),
            # CPU until the pings were wound down (slightly past the last prompt response).
            "agent_cpu_us_per_chunk": agent_cpu / total * 1e6,
            "agent_cpu_share": agent_cpu / wall,
            "client_cpu_share": client_cpu / wall,
        }


class _CpuMeter:
    """CPU seconds used by the agent's process tree and by this client over a window."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.agent0 = tree_cpu_seconds(pid)
        self.client0 = time.process_time()

    def stop(self) -> tuple[float, float]:
        return tree_cpu_seconds(self.pid) - self.agent0, time.process_time() - self.client0


def ping_until(conn: AgentConn, session_id: str, interval: float, done: Event, pings: list[Call]) -> None:
    """Send a `ping` every `interval` seconds (open loop: never waits for answers) until `done`."""
    next_at = time.perf_counter()
    while not done.is_set():
        next_at += interval
        delay = next_at - time.perf_counter()
        if delay > 0:
            if done.wait(delay):
                return
        else:
            next_at = time.perf_counter()  # fell behind (the reader had the CPU): no catch-up burst
        pings.append(conn.send(*ping(conn, session_id, len(pings))))


def ping(conn: AgentConn, session_id: str, k: int) -> tuple[str, dict[str, object]]:
    """The k-th cheap control request on an idle session: `session/set_mode` between the demo's two
    modes; under ACP v2, which has no modes, `session/set_config_option` between its two models."""
    if conn.protocol_version >= 2:
        return "session/set_config_option", {"sessionId": session_id, "configId": "model", "type": "id",
                                             "value": ("echo-careful", "echo-fast")[k % 2]}
    return "session/set_mode", {"sessionId": session_id, "modeId": ("code", "ask")[k % 2]}


def w3_cancel(command: Sequence[str], sizes: Sizes) -> Metrics:
    """W3: streams run while waiting prompts are cancelled one by one; cancel write → response read."""
    with AgentConn(command, read_pause=sizes.read_pause, env=AGENT_ENV, protocol_version=sizes.protocol) as conn:
        conn.start_reader()
        conn.initialize(sizes.timeout)
        sids = conn.new_sessions(sizes.w3_streams + sizes.w3_waiters)
        streamers, waiters = sids[: sizes.w3_streams], sids[sizes.w3_streams :]
        waits = conn.send_many([("session/prompt", conn.prompt_params(s, "/wait")) for s in waiters])
        text = f"/stream {sizes.w3_chunks} {sizes.chunk_size}"
        streams = conn.send_many([("session/prompt", conn.prompt_params(s, text)) for s in streamers])
        # Cancelling starts once the streams are under way: first chunk read, then a short settle.
        with gevent.Timeout(sizes.timeout, AgentFailed("W3: no chunk arrived")):
            while not conn.scanner.chunks:
                gevent.sleep(0.001)
        gevent.sleep(sizes.w3_settle)
        latencies = []
        ahead = []
        last_answer = 0
        for sid, call in zip(waiters, waits):
            if call.done:
                raise AgentFailed(f"W3: /wait answered before its cancel: {call.response}")
            read_at_send = conn.scanner.bytes
            sent = conn.notify("session/cancel", {"sessionId": sid})
            result = conn.wait(call, sizes.timeout)
            if result.get("stopReason") != "cancelled":
                raise AgentFailed(f"W3: cancelled /wait answered {result}")
            latencies.append((call.answered_at - sent) * 1000)
            ahead.append(max(0, call.answered_pos - read_at_send) / 1024)
            last_answer = call.answered_pos
        # A stream counts as running if its response came after the last cancel's in the output.
        running = sum(1 for c in streams if not c.done or c.answered_pos > last_answer)
        for sid in streamers:  # wind down: not measured
            conn.notify("session/cancel", {"sessionId": sid})
        return {
            "cancel_p50_ms": percentile(latencies, 50),
            "cancel_p99_ms": percentile(latencies, 99),
            "cancel_max_ms": max(latencies),
            "cancel_behind_kib_p50": percentile(ahead, 50),
            "streams_running": float(running),
            "all_streams_running": float(running == sizes.w3_streams),
        }


def w4_round_trips(command: Sequence[str], sizes: Sizes) -> Metrics:
    """W4: sequential `session/set_mode` round trips on an idle session (under ACP v2, which has no
    modes, `session/set_config_option` of the demo's `model`)."""
    with AgentConn(command, read_pause=sizes.read_pause, env=AGENT_ENV, protocol_version=sizes.protocol) as conn:
        conn.initialize(sizes.timeout)
        (sid,) = conn.new_sessions(1)
        rtts = []
        for k in range(sizes.w4_round_trips):
            call = conn.send(*ping(conn, sid, k))
            conn.wait(call, 30.0)
            rtts.append(call.latency * 1000)
        return {"rtt_p50_ms": percentile(rtts, 50), "rtt_p99_ms": percentile(rtts, 99)}


def w5_startup(command: Sequence[str], sizes: Sizes) -> Metrics:
    """W5: from just before the process is spawned to reading the `initialize` response; the
    median of `w5_starts` starts, after one unmeasured start (bytecode and page cache warm)."""
    samples = []
    for n in range(sizes.w5_starts + 1):
        with AgentConn(command, read_pause=sizes.read_pause, env=AGENT_ENV, protocol_version=sizes.protocol) as conn:
            call = conn.initialize(sizes.timeout)
            if n:
                samples.append((call.answered_at - conn.started_at) * 1000)
    return {"init_ms": statistics.median(samples)}


def w6_memory(command: Sequence[str], sizes: Sizes) -> Metrics:
    """W6: resident memory (process tree) idle after `initialize`, then after N `session/new`."""
    with AgentConn(command, read_pause=sizes.read_pause, env=AGENT_ENV, protocol_version=sizes.protocol) as conn:
        conn.initialize(sizes.timeout)
        gevent.sleep(sizes.settle)
        idle = tree_rss_bytes(conn.pid)
        conn.new_sessions(sizes.w6_sessions)
        gevent.sleep(sizes.settle)
        after = tree_rss_bytes(conn.pid)
        return {"idle_mib": idle / 2**20, "after_mib": after / 2**20, "per_session_kib": (after - idle) / sizes.w6_sessions / 1024}

