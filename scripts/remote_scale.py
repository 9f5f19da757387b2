"""Many ACP connections over WebSocket to one `acp-green serve --listen` process.

Starts `acp-green serve --listen 127.0.0.1:0 --ephemeral` (the demo agent) as a subprocess, then,
from this one client process (asyncio and `websockets`), opens N WebSocket connections to
ws://HOST:PORT/acp. Each does `initialize` and `session/new`; once all are set up, every connection
sends `session/prompt` with `/stream CHUNKS CHUNK_BYTES` at once, and while its stream runs sends
CONTROLS control requests (`session/set_mode` by default), spread evenly over the stream (one each
time another 1/(CONTROLS+1) of its chunks has arrived), timing each from its send to its answer.

Reports connections opened and failed, updates received, wall times, control latency p50/p99/max,
the server's RSS (before any connection, once all are set up, its peak, after they close), RSS per
connection, and the server's CPU seconds; then SIGTERMs the server and checks it exits 0.

    .venv/bin/python scripts/remote_scale.py --connections 1000 --chunks 200 --chunk-bytes 256 --controls 5 [--json]

Progress goes to stderr every couple of seconds. So that a slow client is not mistaken for a slow
server, the client's own event-loop lag and the peak bytes left unread in the kernel's socket
buffers (this process's ends and the server's, from /proc/net/tcp) are reported too.

For a closer look: `--control stats` sends `_acp_green/stats` instead (its answer carries the
connection's outbound backlog when it was handled; each one walks the server's heap, so it loads the
server more than set_mode), `--dump-controls FILE` writes each control's send and answer times
(CLOCK_MONOTONIC, comparable with timestamps taken in the server), and `--server-cmd` runs another
command instead of `python -m acp_green` (a wrapper that adds such timestamps, another build).
See docs/PERFORMANCE.md, "Many connections over WebSocket".
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import math
import os
import re
import resource
import shlex
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

try:
    from websockets.asyncio.client import connect as ws_connect
except ImportError:  # pragma: no cover - said plainly instead of a traceback
    sys.exit("remote_scale.py needs the `websockets` package (pip install websockets)")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
ANNOUNCE = re.compile(r"serving ACP at (http\S+)")


# -- the server process -------------------------------------------------------------------------
def raise_fd_limit(wanted: int) -> tuple[int, int]:
    """Raise this process's RLIMIT_NOFILE soft limit to `wanted` (at most the hard limit, raised if allowed)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= wanted:
        return soft, hard
    if hard != resource.RLIM_INFINITY and hard < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, wanted))  # root may raise the hard limit
            return wanted, wanted
        except (ValueError, OSError):
            wanted = hard
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def rss_kib(pid: int, key: str = "VmRSS") -> int:
    """A /proc/PID/status memory line in KiB (VmRSS now, VmHWM the peak); 0 once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def open_fds(pid: int) -> int:
    """How many descriptors the process has open (-1 once it is gone)."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def cpu_seconds(pid: int) -> float:
    """utime + stime of /proc/PID/stat, in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14 and 15 of the whole line


class ServerProcess:
    """`acp-green serve --listen` as a child; its stderr is kept (the last lines) and counted."""

    def __init__(self, connections: int, log_level: str, extra: list[str], command: list[str] | None = None) -> None:
        limit = connections + 1024
        argv = [*(command or [sys.executable, "-m", "acp_green"]), "serve", "--listen", "127.0.0.1:0", "--ephemeral",
                "--max-connections", str(max(4096, connections)), "--log-level", log_level, *extra]

        def child_limits() -> None:
            raise_fd_limit(limit)

        self.argv = argv
        self.proc = subprocess.Popen(argv, cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, preexec_fn=child_limits)
        self.pid = self.proc.pid
        self.url: str | None = None
        self.lines: collections.deque[str] = collections.deque(maxlen=400)
        self.counts: collections.Counter[str] = collections.Counter()
        self._announced = threading.Event()
        self._reader = threading.Thread(target=self._read_stderr, name="server-stderr", daemon=True)
        self._reader.start()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append(line)
            for word in ("CRITICAL", "ERROR", "WARNING", "Traceback"):
                if word in line:
                    self.counts[word] += 1
            if self.url is None:
                found = ANNOUNCE.search(line)
                if found:
                    self.url = found.group(1)
                    self._announced.set()
        self._announced.set()  # the process ended (or closed stderr) without announcing

    def wait_announced(self, timeout: float) -> str:
        self._announced.wait(timeout)
        if self.url is None:
            tail = "\n".join(self.lines)
            raise RuntimeError(f"the server did not say where it listens (exit {self.proc.poll()}):\n{tail}")
        return "ws" + self.url[len("http"):]

    def stop(self, timeout: float) -> int | None:
        """SIGTERM, then its exit code (None if it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None
        self._reader.join(5)
        return code


class Sampler(threading.Thread):
    """Samples the server's VmRSS every `interval` s, keeping the largest seen; and, every
    `queue_interval` s, the bytes waiting in the kernel's receive buffers of the connections to
    `port` (/proc/net/tcp): on the client's sockets (sent by the server, not yet read here) and
    on the server's (sent by the client, not yet read by the server)."""

    def __init__(self, pid: int, port: int, interval: float = 0.05, queue_interval: float = 0.25) -> None:
        super().__init__(name="rss-sampler", daemon=True)
        self.pid, self.port, self.interval, self.queue_interval = pid, port, interval, queue_interval
        self.peak = 0
        self.current = 0
        self.client_unread_peak = 0
        self.server_unread_peak = 0
        self._halt = threading.Event()

    def run(self) -> None:
        next_queues = 0.0
        while not self._halt.is_set():
            self.current = rss_kib(self.pid)
            self.peak = max(self.peak, self.current)
            if time.monotonic() >= next_queues:
                next_queues = time.monotonic() + self.queue_interval
                client, server = unread_bytes(self.port)
                self.client_unread_peak = max(self.client_unread_peak, client)
                self.server_unread_peak = max(self.server_unread_peak, server)
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join()


def unread_bytes(port: int) -> tuple[int, int]:
    """Bytes received but not yet read: summed over the client ends and over the server ends of `port`'s connections."""
    client = server = 0
    try:
        with open("/proc/net/tcp") as f:
            next(f)
            for line in f:
                fields = line.split()
                if fields[3] != "01":  # ESTABLISHED only
                    continue
                unread = int(fields[4].split(":")[1], 16)
                if int(fields[2].rsplit(":", 1)[1], 16) == port:
                    client += unread
                elif int(fields[1].rsplit(":", 1)[1], 16) == port:
                    server += unread
    except OSError:
        pass
    return client, server


# -- the client ---------------------------------------------------------------------------------
@dataclass
class Totals:
    """What every connection adds to, as it goes."""

    opened: int = 0
    set_up: int = 0
    failed: int = 0
    failures: collections.Counter[str] = field(default_factory=collections.Counter)
    updates: int = 0
    chunks: int = 0
    prompts_done: int = 0
    stop_reasons: collections.Counter[str] = field(default_factory=collections.Counter)
    short_streams: int = 0
    control_latencies: list[float] = field(default_factory=list)
    #: Per control (in order of sending on its connection): its latencies.
    control_by_index: collections.defaultdict[int, list[float]] = field(default_factory=lambda: collections.defaultdict(list))
    #: Per control answer: how many of its connection's chunks arrived between its send and its answer.
    chunks_before_answer: list[int] = field(default_factory=list)
    #: With --control stats: the connection's outbound backlog when each was answered (queued ahead of it).
    queued_ahead: list[int] = field(default_factory=list)
    #: With --dump-controls: (sessionId, id, sent, answered, chunks when sent, chunks when answered).
    control_records: list[tuple[Any, ...]] = field(default_factory=list)
    control_errors: collections.Counter[str] = field(default_factory=collections.Counter)
    controls_late: int = 0  # sent, but answered after the prompt's own answer


class AcpSocket:
    """One WebSocket ACP connection: requests by id, a reader that counts updates and sends controls."""

    def __init__(self, ws: Any, totals: Totals, args: argparse.Namespace) -> None:
        self.ws = ws
        self.totals = totals
        self.args = args
        self.next_id = 0
        self.pending: dict[int, tuple[asyncio.Future[Any], float]] = {}
        self.session_id: str | None = None
        self.chunks = 0
        self.thresholds: list[int] = []
        self.controls_sent = 0
        self.control_ids: dict[int, tuple[int, int]] = {}  # request id -> (its number, chunks when sent)
        self.prompt_answered = False
        self.reader: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.reader = asyncio.get_running_loop().create_task(self._read())

    async def request(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """Send a request; its answer and its round trip in seconds."""
        self.next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        sent = time.perf_counter()
        self.pending[self.next_id] = (future, sent)
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}))
        answer, received = await future
        return answer, received - sent

    async def _send_control(self) -> None:
        self.next_id += 1
        request_id = self.next_id
        number = self.controls_sent
        self.controls_sent += 1
        if self.args.control == "set_mode":
            method, params = "session/set_mode", {"sessionId": self.session_id, "modeId": ("code", "ask")[number % 2]}
        elif self.args.control == "list":
            method, params = "session/list", {}
        else:  # the runtime's counters: its answer says how many bytes were queued ahead of it
            method, params = "_acp_green/stats", {}
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        future.add_done_callback(self._control_done)
        self.pending[request_id] = (future, time.perf_counter())
        self.control_ids[request_id] = (number, self.chunks)
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))

    def _control_done(self, future: asyncio.Future[Any]) -> None:
        if future.cancelled() or future.exception() is not None:
            self.totals.control_errors["no answer"] += 1
            return
        answer, _received = future.result()
        if "error" in answer:
            self.totals.control_errors[str(answer["error"].get("message", answer["error"]))[:80]] += 1
        elif isinstance(answer.get("result"), dict) and "outboundQueuedBytes" in answer["result"]:
            self.totals.queued_ahead.append(answer["result"]["outboundQueuedBytes"])

    async def _read(self) -> None:
        totals = self.totals
        try:
            async for text in self.ws:
                received = time.perf_counter()
                # Updates are most of the traffic: counted without decoding them.
                if '"session/update"' in text and '"id"' not in text[:40]:
                    totals.updates += 1
                    if '"agent_message_chunk"' in text:
                        self.chunks += 1
                        totals.chunks += 1
                        if self.thresholds and self.chunks >= self.thresholds[0]:
                            self.thresholds.pop(0)
                            await self._send_control()
                    continue
                message = json.loads(text)
                if "method" in message:  # a request from the agent: the client offers nothing
                    if "id" in message:
                        await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": message["id"],
                                                       "error": {"code": -32601, "message": "Method not found"}}))
                    elif message.get("method") == "session/update":
                        totals.updates += 1
                    continue
                entry = self.pending.pop(message.get("id"), None)
                if entry is None:
                    continue
                future, sent = entry
                control = self.control_ids.get(message.get("id"))
                if control is not None:
                    totals.control_latencies.append(received - sent)
                    totals.control_by_index[control[0]].append(received - sent)
                    totals.chunks_before_answer.append(self.chunks - control[1])
                    if self.args.dump_controls or self.args.stages:
                        totals.control_records.append((self.session_id, message.get("id"), sent, received, control[1], self.chunks))
                    if self.prompt_answered:
                        totals.controls_late += 1
                if not future.done():
                    future.set_result((message, received))
        except Exception as exc:  # the socket closed under us: every waiter learns it
            for future, _ in self.pending.values():
                if not future.done():
                    future.set_exception(ConnectionError(f"connection lost: {type(exc).__name__}: {exc}"))
            return
        for future, _ in self.pending.values():
            if not future.done():
                future.set_exception(ConnectionError("the server closed the connection"))


def _failure(totals: Totals, stage: str, exc: BaseException) -> None:
    totals.failed += 1
    totals.failures[f"{stage}: {type(exc).__name__}: {str(exc)[:120]}"] += 1


async def one_connection(url: str, args: argparse.Namespace, totals: Totals, connecting: asyncio.Semaphore,
                         all_set: asyncio.Event, setup_done: list[int], sockets: list[Any]) -> None:
    stage = "connect"
    conn: AcpSocket | None = None
    try:
        async with connecting:
            ws = await ws_connect(url, compression=None, ping_interval=None, open_timeout=args.timeout,
                                  close_timeout=10, max_size=None, max_queue=None, proxy=None)
            sockets.append(ws)
            totals.opened += 1
            conn = AcpSocket(ws, totals, args)
            conn.start()
            stage = "initialize"
            answer, _ = await asyncio.wait_for(conn.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}}),
                                               args.timeout)
            if "error" in answer:
                raise RuntimeError(f"initialize refused: {answer['error']}")
            stage = "session/new"
            answer, _ = await asyncio.wait_for(conn.request("session/new", {"cwd": "/tmp", "mcpServers": []}), args.timeout)
            if "error" in answer:
                raise RuntimeError(f"session/new refused: {answer['error']}")
            conn.session_id = answer["result"]["sessionId"]
        totals.set_up += 1
    except Exception as exc:
        _failure(totals, stage, exc)
        return
    finally:
        setup_done[0] += 1
        if setup_done[0] == args.connections:
            all_set.set()
    await all_set.wait()
    stage = "session/prompt"
    try:
        step = args.chunks / (args.controls + 1)
        conn.thresholds = [max(1, round(step * (i + 1))) for i in range(args.controls)]
        answer, _ = await asyncio.wait_for(conn.request("session/prompt", {
            "sessionId": conn.session_id,
            "prompt": [{"type": "text", "text": f"/stream {args.chunks} {args.chunk_bytes}"}],
        }), args.timeout)
        conn.prompt_answered = True
        if "error" in answer:
            raise RuntimeError(f"prompt refused: {answer['error']}")
        totals.stop_reasons[str(answer["result"].get("stopReason"))] += 1
        totals.prompts_done += 1
        if conn.chunks != args.chunks:
            totals.short_streams += 1
        # Controls not yet answered (sent late in the stream): wait for them too.
        waiting = [future for request_id, (future, _) in list(conn.pending.items()) if request_id in conn.control_ids]
        if waiting:
            await asyncio.wait(waiting, timeout=args.timeout)
    except Exception as exc:
        _failure(totals, stage, exc)


async def stats_probe(url: str, timeout: float) -> dict[str, Any]:
    """The server's own counters (`_acp_green/stats`), asked on a connection of their own."""
    try:
        async with ws_connect(url, compression=None, ping_interval=None, open_timeout=timeout, proxy=None) as ws:
            for request_id, method, params in ((1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}}),
                                               (2, "_acp_green/stats", {})):
                await ws.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
                while True:
                    message = json.loads(await asyncio.wait_for(ws.recv(), timeout))
                    if message.get("id") == request_id and "method" not in message:
                        break
            return message.get("result") or {"error": message.get("error")}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


async def loop_lag(stop: asyncio.Event, lags: list[float], period: float = 0.01) -> None:
    """How late this process's event loop wakes a 10 ms sleep: its own share of every latency."""
    while not stop.is_set():
        start = time.perf_counter()
        await asyncio.sleep(period)
        lags.append(time.perf_counter() - start - period)


async def progress(stop: asyncio.Event, totals: Totals, server: ServerProcess, sampler: Sampler, phase: list[str],
                   started: float, args: argparse.Namespace) -> None:
    if args.progress <= 0:
        await stop.wait()
        return
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), args.progress)
        except asyncio.TimeoutError:
            pass
        if stop.is_set():
            continue
        print(f"[{time.monotonic() - started:7.1f} s] {phase[0]:<9} opened {totals.opened}/{args.connections} "
              f"set up {totals.set_up} failed {totals.failed}  updates {totals.updates}  "
              f"prompts done {totals.prompts_done}  controls answered {len(totals.control_latencies)}  "
              f"server RSS {sampler.current / 1024:.1f} MiB CPU {cpu_seconds(server.pid):.1f} s", file=sys.stderr, flush=True)


async def run_clients(url: str, args: argparse.Namespace, server: ServerProcess, sampler: Sampler,
                      marks: dict[str, Any]) -> Totals:
    totals = Totals()
    connecting = asyncio.Semaphore(args.connect_concurrency or args.connections)
    all_set = asyncio.Event()
    setup_done = [0]
    sockets: list[Any] = []
    phase = ["setup"]
    stop = asyncio.Event()
    lags: list[float] = []
    started = time.monotonic()
    helpers = [asyncio.create_task(progress(stop, totals, server, sampler, phase, started, args)),
               asyncio.create_task(loop_lag(stop, lags))]

    marks["stats_before"] = await stats_probe(url, args.timeout)
    marks["t_start"] = time.perf_counter()
    marks["client_cpu_start"] = time.process_time()
    tasks = [asyncio.create_task(one_connection(url, args, totals, connecting, all_set, setup_done, sockets))
             for _ in range(args.connections)]
    await all_set.wait()
    marks["t_setup"] = time.perf_counter()
    # Woken before any connection (they wait on `all_set` after this did): no prompt is sent yet.
    marks["rss_setup"] = rss_kib(server.pid)
    marks["fds_setup"] = open_fds(server.pid)
    marks["cpu_setup"] = cpu_seconds(server.pid)
    marks["lag_setup"] = len(lags)
    marks["updates_setup"] = totals.updates
    phase[0] = "streaming"
    print(f"all {args.connections} set up ({totals.failed} failed) in {marks['t_setup'] - marks['t_start']:.2f} s; "
          f"server RSS {marks['rss_setup'] / 1024:.1f} MiB; streaming", file=sys.stderr, flush=True)
    await asyncio.gather(*tasks)
    marks["t_streamed"] = time.perf_counter()
    marks["cpu_streamed"] = cpu_seconds(server.pid)
    marks["client_cpu_end"] = time.process_time()
    marks["lag_stream"] = lags[marks["lag_setup"]:]
    phase[0] = "closing"
    await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)
    marks["t_closed"] = time.perf_counter()
    await asyncio.sleep(1.0)  # the server ends each connection after its close
    marks["stats_after"] = await stats_probe(url, args.timeout)
    stop.set()
    await asyncio.gather(*helpers, return_exceptions=True)
    return totals


# -- --stages: where a control request's time goes, from timestamps taken inside the server -----
#: Run as `python -c STAGES_BOOTSTRAP serve ...`: acp-green with a timestamp on each
#: session/set_mode when its WebSocket reader hands it on (PushedMessages.push), when the
#: connection's receive loop starts handling it (Endpoint.handle_line) and when the connection's
#: writer has written its answer (Outbound._write_all); plus, every 50 ms, how long a greenlet
#: woken through a hub callback (`gevent.sleep(0)`, as an Event wakes the receive loop and the
#: writer) waits for its turn, and the hub's iteration count. Written to $ACP_SCALE_STAGES at exit.
#: $ACP_SCALE_SWITCH_INTERVAL, if set, is passed to gevent.setswitchinterval (--switch-interval).
#: It wraps internals by name: a diagnostic, to be kept in step with them.
STAGES_BOOTSTRAP = """
import gevent.monkey
gevent.monkey.patch_all()
import atexit, json, os, time
import gevent
from acp_green.rpc import channel, endpoint, transport

records, put_bytes, written_bytes, waiting = [], {}, {}, {}

def _key(data):
    message = json.loads(data)
    return message["params"]["sessionId"], message["id"]

_push = channel.PushedMessages.push
def push(self, line):
    if b'"session/set_mode"' in line.data:
        records.append(("read", *_key(line.data), time.monotonic()))
    return _push(self, line)
channel.PushedMessages.push = push

_handle_line = endpoint.Endpoint.handle_line
def handle_line(self, line):
    if b'"session/set_mode"' not in line:
        return _handle_line(self, line)
    key = _key(line)
    records.append(("handled", *key, time.monotonic(), self.outbound.queued_bytes))
    _handle_line(self, line)
    waiting.setdefault(id(self.outbound), []).append((put_bytes.get(id(self.outbound), 0), key))
endpoint.Endpoint.handle_line = handle_line

_put = transport.Outbound.put
def put(self, data):
    put_bytes[id(self)] = put_bytes.get(id(self), 0) + len(data)
    return _put(self, data)
transport.Outbound.put = put

_write_all = transport.Outbound._write_all
def write_all(self, data):
    _write_all(self, data)
    done = written_bytes[id(self)] = written_bytes.get(id(self), 0) + len(data)
    pending = waiting.get(id(self))
    if pending:
        now = time.monotonic()
        records.extend(("written", *key, now) for end, key in pending if end <= done)
        waiting[id(self)] = [(end, key) for end, key in pending if end > done]
transport.Outbound._write_all = write_all

def hub_watch():
    loop = gevent.get_hub().loop
    while True:
        gevent.sleep(0.05)
        before = time.monotonic()
        gevent.sleep(0)
        records.append(("hub", "", 0, before, time.monotonic() - before, loop.iteration))
gevent.spawn(hub_watch)
if os.environ.get("ACP_SCALE_SWITCH_INTERVAL"):
    gevent.setswitchinterval(float(os.environ["ACP_SCALE_SWITCH_INTERVAL"]))

def dump():
    with open(os.environ["ACP_SCALE_STAGES"], "w") as out:
        json.dump(records, out)
atexit.register(dump)

from acp_green.cli import cli
cli(prog_name="acp-green")
"""


def stage_report(path: str, records: list[tuple[Any, ...]], streaming: tuple[float, float]) -> dict[str, Any]:
    """Each control's round trip cut at the server's timestamps (ms), and the hub's callback wait while streaming."""
    try:
        with open(path) as f:
            server = json.load(f)
    except (OSError, ValueError) as exc:
        return {"error": f"no stage timestamps from the server: {exc}"}
    marks: dict[tuple[str, int], dict[str, list[Any]]] = collections.defaultdict(dict)
    hub: list[tuple[float, float, int]] = []
    for kind, session, request_id, *rest in server:
        if kind == "hub":
            hub.append((rest[0], rest[1], rest[2]))
        else:
            marks[(session, request_id)][kind] = rest
    cuts: dict[str, list[float]] = collections.defaultdict(list)
    for session, request_id, sent, answered, _, _ in records:
        seen = marks.get((session, request_id), {})
        if not all(k in seen for k in ("read", "handled", "written")):
            continue
        read, handled, written = seen["read"][0], seen["handled"][0], seen["written"][0]
        cuts["sent -> the server's WebSocket reader has it (ms)"].append((read - sent) * 1e3)
        cuts["-> the receive loop handles it (ms)"].append((handled - read) * 1e3)
        cuts["-> the writer has written the answer (ms)"].append((written - handled) * 1e3)
        cuts["-> this client has read the answer (ms)"].append((answered - written) * 1e3)
        cuts["output queued ahead of the answer (KiB)"].append(seen["handled"][1] / 1024)
    report: dict[str, Any] = {"controls timed": len(cuts["-> the writer has written the answer (ms)"])}
    for name, values in cuts.items():
        report[name] = {"p50": round(quantile(values, 50), 1), "p99": round(quantile(values, 99), 1), "max": round(max(values), 1)}
    start, end = streaming
    during = [(t, lag, it) for t, lag, it in hub if start <= t <= end]
    if len(during) >= 2:
        lags = [lag for _, lag, _ in during]
        report["hub callback wait while streaming (ms)"] = {"p50": round(quantile(lags, 50) * 1e3, 1),
                                                            "max": round(max(lags) * 1e3, 1)}
        report["hub iterations per s while streaming"] = round((during[-1][2] - during[0][2]) / (during[-1][0] - during[0][0]))
    before = [lag for t, lag, _ in hub if t < start]
    if before:
        report["hub callback wait before streaming, max (ms)"] = round(max(before) * 1e3, 1)
    return report


# -- the report ---------------------------------------------------------------------------------
def quantile(values: list[float], q: int) -> float:
    """The q-th percentile, interpolated between the closest ranks (as the bench reports them)."""
    if not values:
        return math.nan
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=1000, help="WebSocket connections (default 1000)")
    parser.add_argument("--chunks", type=int, default=200, help="chunks each prompt streams (default 200)")
    parser.add_argument("--chunk-bytes", type=int, default=256, help="bytes of each chunk (default 256)")
    parser.add_argument("--controls", type=int, default=5, help="control requests each connection sends during its stream (default 5)")
    parser.add_argument("--control", choices=("set_mode", "list", "stats"), default="set_mode",
                        help="the control request: session/set_mode (default), session/list, or _acp_green/stats "
                             "(reports the outbound bytes queued ahead of each answer; walks the server's heap each time)")
    parser.add_argument("--connect-concurrency", type=int, default=64,
                        help="handshakes in flight at once while connecting (default 64, under the listen backlog of 128; 0: all)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds any one step may take (default 600)")
    parser.add_argument("--progress", type=float, default=2.0, help="seconds between progress lines on stderr (0: none)")
    parser.add_argument("--log-level", default="WARNING", help="the server's --log-level (default WARNING)")
    parser.add_argument("--server-arg", action="append", default=[], help="one more argument for `acp-green serve` (repeatable)")
    parser.add_argument("--server-cmd", default=None,
                        help="run this instead of `python -m acp_green` (split like a shell would; `serve ...` is appended)")
    parser.add_argument("--dump-controls", metavar="FILE", default=None,
                        help="write one JSON line per control request (session, id, sent and answered times on "
                             "CLOCK_MONOTONIC, chunks of its stream received by then) for a closer look")
    parser.add_argument("--stages", action="store_true",
                        help="run the server with timestamps on each set_mode (read, handled, answer written) and "
                             "report where the round trip goes, and how long the hub's callbacks wait")
    parser.add_argument("--switch-interval", type=float, default=None, metavar="S",
                        help="an experiment: the server runs with gevent.setswitchinterval(S) (gevent's own default is "
                             "0.005: how long the hub runs callbacks before it polls again); implies --stages")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args()

    limits = raise_fd_limit(args.connections + 1024)
    command = shlex.split(args.server_cmd) if args.server_cmd else None
    stages_file = None
    if args.switch_interval is not None:
        args.stages = True
        os.environ["ACP_SCALE_SWITCH_INTERVAL"] = str(args.switch_interval)
    if args.stages:
        import tempfile

        handle, stages_file = tempfile.mkstemp(prefix="acp-scale-stages-", suffix=".json")
        os.close(handle)
        os.environ["ACP_SCALE_STAGES"] = stages_file
        command = [*(command or [sys.executable]), "-c", STAGES_BOOTSTRAP]
    server = ServerProcess(args.connections, args.log_level, args.server_arg, command)
    marks: dict[str, Any] = {}
    totals: Totals | None = None
    exit_code: int | None = None
    error: str | None = None
    sampler: Sampler | None = None
    try:
        url = server.wait_announced(60)
        sampler = Sampler(server.pid, int(url.rsplit(":", 1)[1].split("/")[0]))
        time.sleep(1.0)  # let start-up settle (the store opens in the background) before the baseline
        rss_base = rss_kib(server.pid)
        fds_base = open_fds(server.pid)
        cpu_base = cpu_seconds(server.pid)
        print(f"server pid {server.pid} at {url}; RSS {rss_base / 1024:.1f} MiB; fd limit {limits[0]}; "
              f"{args.connections} connections x /stream {args.chunks} {args.chunk_bytes}, {args.controls} {args.control} each",
              file=sys.stderr, flush=True)
        sampler.start()
        totals = asyncio.run(run_clients(url, args, server, sampler, marks))
        rss_closed = rss_kib(server.pid)
        fds_closed = open_fds(server.pid)
        rss_hwm = rss_kib(server.pid, "VmHWM")
        cpu_end = cpu_seconds(server.pid)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        rss_base = rss_closed = rss_hwm = 0
        fds_base = fds_closed = -1
        cpu_base = cpu_end = math.nan
    finally:
        try:
            if sampler is not None and sampler.is_alive():
                sampler.stop()
        finally:
            exit_code = server.stop(60)

    n = args.connections
    result: dict[str, Any] = {"argv": server.argv, "connections": n, "chunks": args.chunks, "chunk_bytes": args.chunk_bytes,
                              "controls_each": args.controls, "control": args.control, "server_exit_code": exit_code,
                              "server_log_counts": dict(server.counts), "error": error}
    if totals is not None:
        latencies = sorted(totals.control_latencies)
        stream_s = marks["t_streamed"] - marks["t_setup"]
        lag = marks["lag_stream"]
        assert sampler is not None
        peak = max(sampler.peak, rss_hwm)
        result.update({
            "opened": totals.opened, "set_up": totals.set_up, "failed": totals.failed, "failures": dict(totals.failures),
            "prompts_done": totals.prompts_done, "stop_reasons": dict(totals.stop_reasons),
            "short_streams": totals.short_streams,
            "updates": totals.updates, "chunks_received": totals.chunks, "chunks_expected": n * args.chunks,
            "setup_s": round(marks["t_setup"] - marks["t_start"], 3), "stream_s": round(stream_s, 3),
            "wall_s": round(marks["t_closed"] - marks["t_start"], 3),
            "updates_per_s": round((totals.updates - marks["updates_setup"]) / stream_s) if stream_s > 0 else None,
            "chunk_mib_per_s": round(totals.chunks * args.chunk_bytes / stream_s / (1 << 20), 2) if stream_s > 0 else None,
            "controls_answered": len(latencies), "controls_expected": totals.set_up * args.controls,
            "control_errors": dict(totals.control_errors), "controls_answered_after_prompt": totals.controls_late,
            "control_ms": {"p50": round(quantile(latencies, 50) * 1e3, 2), "p99": round(quantile(latencies, 99) * 1e3, 2),
                           "max": round(latencies[-1] * 1e3, 2) if latencies else None},
            "control_p50_ms_by_order": {str(i + 1): round(quantile(v, 50) * 1e3, 2) for i, v in sorted(totals.control_by_index.items())},
            "chunks_before_answer": {"p50": quantile([float(c) for c in totals.chunks_before_answer], 50),
                                     "max": max(totals.chunks_before_answer, default=None)},
            "queued_ahead_kib": ({"p50": round(quantile([float(q) for q in totals.queued_ahead], 50) / 1024, 1),
                                  "max": round(max(totals.queued_ahead) / 1024, 1)} if totals.queued_ahead else None),
            "unread_kib_peak": {"client_sockets": round(sampler.client_unread_peak / 1024), "server_sockets": round(sampler.server_unread_peak / 1024)},
            "client_loop_lag_ms": {"p99": round(quantile(lag, 99) * 1e3, 2), "max": round(max(lag) * 1e3, 2) if lag else None},
            "server_rss_mib": {"baseline": round(rss_base / 1024, 1), "set_up": round(marks["rss_setup"] / 1024, 1),
                               "peak": round(peak / 1024, 1), "after_close": round(rss_closed / 1024, 1)},
            "server_counters": {when: {k: marks[f"stats_{when}"].get(k) for k in ("greenlets", "finishedGreenlets", "liveSessions", "activeRequests", "error")
                                       if k in marks[f"stats_{when}"]} for when in ("before", "after")},
            "server_fds": {"baseline": fds_base, "set_up": marks["fds_setup"], "after_close": fds_closed},
            "rss_kib_per_connection": {"set_up": round((marks["rss_setup"] - rss_base) / n, 1),
                                       "peak": round((peak - rss_base) / n, 1)},
            "server_cpu_s": {"setup": round(marks["cpu_setup"] - cpu_base, 2),
                             "streaming": round(marks["cpu_streamed"] - marks["cpu_setup"], 2),
                             "total": round(cpu_end - cpu_base, 2)},
            "client_cpu_s": round(marks["client_cpu_end"] - marks["client_cpu_start"], 2),
        })
    ok = (error is None and exit_code == 0 and totals is not None and totals.failed == 0 and totals.short_streams == 0
          and not totals.control_errors and len(totals.control_latencies) == totals.set_up * args.controls)
    result["ok"] = ok
    if stages_file is not None:
        if totals is not None and "t_streamed" in marks:
            result["stages"] = stage_report(stages_file, totals.control_records, (marks["t_setup"], marks["t_streamed"]))
        os.unlink(stages_file)
    if not ok:
        result["server_log_tail"] = list(server.lines)[-40:]

    if args.dump_controls and totals is not None:
        with open(args.dump_controls, "w") as f:
            for record in totals.control_records:
                f.write(json.dumps(dict(zip(("sessionId", "id", "sent", "answered", "chunksSent", "chunksAnswered"), record))) + "\n")
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_table(result)
    return 0 if ok else 1


def print_table(r: dict[str, Any]) -> None:
    rows: list[tuple[str, str]] = [("server", " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(r["argv"])))]
    if "opened" in r:
        rows += [
            ("connections opened / set up / failed", f"{r['opened']} / {r['set_up']} / {r['failed']} (of {r['connections']})"),
            ("prompts answered (stop reasons)", f"{r['prompts_done']} ({', '.join(f'{k} {v}' for k, v in r['stop_reasons'].items())})"),
            ("updates received", f"{r['updates']} ({r['chunks_received']} of {r['chunks_expected']} chunks; "
                                 f"{r['short_streams']} streams short)"),
            ("wall time: setup / streaming / all", f"{r['setup_s']:.2f} s / {r['stream_s']:.2f} s / {r['wall_s']:.2f} s"),
            ("throughput while streaming", f"{r['updates_per_s']} updates/s, {r['chunk_mib_per_s']} MiB/s of chunk text"),
            (f"control {r['control']}: answered / expected", f"{r['controls_answered']} / {r['controls_expected']}"
                                                            f"{'; errors ' + str(r['control_errors']) if r['control_errors'] else ''}"),
            ("controls answered after their prompt's answer", str(r["controls_answered_after_prompt"])),
            ("control latency p50 / p99 / max", f"{r['control_ms']['p50']} / {r['control_ms']['p99']} / {r['control_ms']['max']} ms"),
            ("control p50 by order on its connection", ", ".join(f"#{k} {v}" for k, v in r["control_p50_ms_by_order"].items()) + " ms"),
            ("chunks arriving between control and answer", f"p50 {r['chunks_before_answer']['p50']}, max {r['chunks_before_answer']['max']}"),
            *([("outbound bytes queued ahead of the answer", f"p50 {r['queued_ahead_kib']['p50']} KiB, max {r['queued_ahead_kib']['max']} KiB")]
              if r["queued_ahead_kib"] else []),
            ("socket bytes unread, peak: client / server", f"{r['unread_kib_peak']['client_sockets']} / {r['unread_kib_peak']['server_sockets']} KiB"),
            ("client event-loop lag p99 / max", f"{r['client_loop_lag_ms']['p99']} / {r['client_loop_lag_ms']['max']} ms"),
            ("server RSS baseline / set up / peak / closed",
             " / ".join(f"{r['server_rss_mib'][k]:.1f}" for k in ("baseline", "set_up", "peak", "after_close")) + " MiB"),
            ("server descriptors baseline / set up / closed", " / ".join(str(r["server_fds"][k]) for k in ("baseline", "set_up", "after_close"))),
            ("server greenlets unfinished before / after (finished, gc not forced)",
             f"{r['server_counters']['before'].get('greenlets')} / {r['server_counters']['after'].get('greenlets')}"
             f" ({r['server_counters']['before'].get('finishedGreenlets')} / {r['server_counters']['after'].get('finishedGreenlets')})"
             f" (live sessions {r['server_counters']['before'].get('liveSessions')} / {r['server_counters']['after'].get('liveSessions')})"),
            ("RSS per connection: set up / peak", f"{r['rss_kib_per_connection']['set_up']:.1f} / {r['rss_kib_per_connection']['peak']:.1f} KiB"),
            ("server CPU: setup / streaming / total", f"{r['server_cpu_s']['setup']} / {r['server_cpu_s']['streaming']} / {r['server_cpu_s']['total']} s"),
            ("client CPU (this process)", f"{r['client_cpu_s']} s"),
        ]
        if r["failures"]:
            rows += [("failure", f"{count} x {what}") for what, count in r["failures"].items()]
    rows += [("server exit code after SIGTERM", str(r["server_exit_code"])),
             ("server log lines: WARNING / ERROR / Traceback",
              " / ".join(str(r["server_log_counts"].get(k, 0)) for k in ("WARNING", "ERROR", "Traceback")))]
    for name, value in (r.get("stages") or {}).items():
        if isinstance(value, dict):
            value = " / ".join(f"{k} {v}" for k, v in value.items())
        rows.append(("stage: " + name, str(value)))
    if r["error"]:
        rows.append(("error", r["error"]))
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")
    print("result: " + ("ok" if r["ok"] else "FAILED"))
    if not r["ok"] and r.get("server_log_tail"):
        print("server stderr (last lines):")
        for line in r["server_log_tail"]:
            print("  " + line)


if __name__ == "__main__":
    sys.exit(main())
