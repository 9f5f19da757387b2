"""`acp-green manifest --check FILE`: what the registry's build and its agent check would find, here.

The checks, in order: the file follows the registry's format; the `icon.svg` beside it follows
the registry's icon rules; the agent starts from the manifest's command; it answers `initialize`
in time; its `authMethods` hold a kind the registry accepts. Without the network, a uvx
distribution is started from this environment's console script of the package's name (or its
`cmd`), which `uvx PACKAGE` would run; `command` replaces that (and is the only way to start an
npx or binary one). Like the registry's check, the agent runs with a fresh
empty HOME unless `keep_home`, so it cannot lean on the author's own login or settings.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gevent
from gevent import subprocess

from gevent.socket import wait_read

from ..rig import reaper
from ..rig.client import default_signal_dispositions
from .format import auth_kind, auth_problem, pypi_name, validate
from .icon import ICON_NAME, icon_file_problems

#: What the registry's check sends as a client: a terminal, files, and terminal-auth support.
CLIENT_CAPABILITIES: dict[str, Any] = {
    "terminal": True,
    "fs": {"readTextFile": True, "writeTextFile": True},
    "_meta": {"terminal_output": True, "terminal-auth": True},
}
CHECKS = ("format", "icon", "start", "initialize", "authMethods")
PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"


@dataclass(frozen=True, slots=True)
class CheckLine:
    """One check's outcome: PASS, FAIL or SKIP (not run: an earlier check failed), and why."""

    check: str
    result: str
    reason: str


@dataclass(slots=True)
class CheckReport:
    """Every check of one manifest, and the command its agent was started with (if it was)."""

    file: str
    lines: list[CheckLine] = field(default_factory=list)
    command: list[str] | None = None

    @property
    def ok(self) -> bool:
        return all(line.result == PASS for line in self.lines)

    def add(self, check: str, result: str, reason: str) -> None:
        self.lines.append(CheckLine(check, result, reason))

    def skip_rest(self, reason: str) -> None:
        done = {line.check for line in self.lines}
        for check in CHECKS:
            if check not in done:
                self.add(check, SKIP, reason)


@dataclass(frozen=True, slots=True)
class CheckOptions:
    """How to start the agent: `command` replaces the manifest's; `timeout` bounds the answer to initialize."""

    command: tuple[str, ...] | None = None
    timeout: float = 10.0
    keep_home: bool = False


def check_manifest(path: str, options: CheckOptions) -> CheckReport:
    """Run every check on the manifest at `path`; a check after a failed one is SKIP."""
    report = CheckReport(path)
    manifest = _read(path, report)
    if manifest is None:
        report.skip_rest("the manifest is not readable")
        return report
    problems = validate(manifest)
    for problem in problems:
        report.add("format", FAIL, str(problem))
    if problems:
        report.skip_rest("the manifest does not follow the format")
        return report
    report.add("format", PASS, f"follows the registry's format (schema; id, version and distribution rules); id {manifest['id']}")
    _check_icon(report, Path(path).absolute().parent / ICON_NAME)
    kind, entry = _distribution_to_start(manifest["distribution"])
    command, how = _command(kind, entry, options)
    if command is None:
        report.add("start", FAIL, how)
        report.skip_rest("the agent did not start")
        return report
    report.command = command
    _run_agent(report, command, how, dict(entry.get("env") or {}), options)
    return report


#: A registry entry is a few hundred bytes; a file beyond this is refused unread (never loaded whole).
MAX_MANIFEST_BYTES = 16 * 1024 * 1024


def _read(path: str, report: CheckReport) -> Any:
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_MANIFEST_BYTES + 1)
        if len(data) > MAX_MANIFEST_BYTES:
            report.add("format", FAIL, f"{path} is larger than {MAX_MANIFEST_BYTES:,} bytes: not a registry entry")
            return None
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        report.add("format", FAIL, f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}")
        return None
    try:
        return json.loads(text)
    except RecursionError:
        report.add("format", FAIL, "not JSON a registry entry could be: nested too deep to read")
        return None
    except json.JSONDecodeError as exc:
        report.add("format", FAIL, f"not JSON: {exc}")
        return None
    except ValueError:  # an integer of more digits than Python converts
        report.add("format", FAIL, "not JSON a registry entry could be: a number too long to read")
        return None


def _check_icon(report: CheckReport, icon: Path) -> None:
    """The icon the registry requires beside the manifest; a bad one fails this check only (the agent still runs)."""
    problems = icon_file_problems(icon)
    for problem in problems:
        report.add("icon", FAIL, problem.message)
    if not problems:
        report.add("icon", PASS, f"{icon} follows the registry's icon rules (16×16, drawn in currentColor)")


def _distribution_to_start(distribution: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """uvx when there is one (it can start here); otherwise the first, whose env a --command gets."""
    kind = "uvx" if "uvx" in distribution else next(iter(distribution))
    entry = distribution[kind]
    if kind == "binary":
        entry = next(iter(entry.values()))
    return kind, entry


def _command(kind: str, entry: dict[str, Any], options: CheckOptions) -> tuple[list[str] | None, str]:
    """The command line to start, and how it stands for the manifest's (or why there is none)."""
    if options.command:
        return list(options.command), f"given by --command, in place of the {kind} distribution"
    if kind != "uvx":
        return None, f"the {kind} distribution needs the network to start; give --command with what it would run"
    name = entry.get("cmd") or pypi_name(entry["package"])
    runs = f"`uvx --from {entry['package']} {name}`" if entry.get("cmd") else f"`uvx {entry['package']}`"
    script = local_script(name, pypi_name(entry["package"]))
    if script is None:
        which = "the manifest's cmd" if entry.get("cmd") else "the command named after the package"
        return None, (f"no console script {name!r} of the installed package {pypi_name(entry['package'])!r} in this "
                      f"environment (uvx runs {which}; a manifest never makes the check run another program): "
                      "install the package here (pip install -e .) or give --command")
    args = [str(arg) for arg in entry.get("args") or []]
    return [script, *args], f"this environment's console script {name} in place of {runs} (no network)"


def local_script(name: str, package: str) -> str | None:
    """The console script `name` that the installed distribution `package` declares, in this
    interpreter's environment. Never a program found on PATH: a manifest is untrusted input, and
    its `cmd` (with its `args`) would otherwise run whatever program has that name."""
    from importlib import metadata

    try:
        declared = metadata.distribution(package).entry_points
    except metadata.PackageNotFoundError:
        return None
    if not any(point.group == "console_scripts" and point.name == name for point in declared):
        return None
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


#: What an agent may write on stdout before it answers initialize; past it, the check stops reading.
MAX_OUTPUT_BEFORE_ANSWER = 1 << 20
INITIALIZE_ID = 1


@dataclass(slots=True)
class _Exchange:
    """What the agent wrote on stdout up to its answer to initialize (read with bounds on bytes and time)."""

    answer: dict[str, Any] | None = None
    answered_after: float = 0.0
    stray: list[bytes] = field(default_factory=list)  # lines that are not JSON-RPC, the first few
    stray_count: int = 0
    flooded: bool = False
    eof: bool = False


class _Agent:
    """The agent command in its own session, its stdout read by the check itself and its stderr kept (bounded)."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.command = command
        reaper.become_subreaper()
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     env=env, start_new_session=True, preexec_fn=default_signal_dispositions())
        self.pid = self.proc.pid
        self.stderr = bytearray()
        self._drain = gevent.spawn(self._drain_stderr)

    def _drain_stderr(self) -> None:
        fd = self.proc.stderr.fileno()
        os.set_blocking(fd, False)
        while True:
            try:
                wait_read(fd)
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            except OSError:
                return
            if not chunk:
                return
            if len(self.stderr) < (64 << 10):  # the tail is what is shown: the rest is read and dropped
                self.stderr.extend(chunk)

    def stderr_tail(self, lines: int = 5) -> str:
        self._drain.join(timeout=0.5)
        text = bytes(self.stderr).decode("utf-8", "replace").strip()
        return "; its stderr ends: " + _short(" | ".join(text.splitlines()[-lines:])) if text else ""

    def ended(self) -> str:
        try:
            return f"exited (code {self.proc.wait(timeout=2)})"
        except subprocess.TimeoutExpired:
            return "closed its output"

    def close(self, answered: bool) -> None:
        if not answered:
            _kill_group(self.pid)  # a silent or flooding agent may never read its EOF: do not wait out the grace
        reaper.end_process(self.proc, self.pid, grace=10)
        self._drain.kill(block=True, timeout=2)
        for stream in (self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except OSError:
                pass


def _run_agent(report: CheckReport, command: list[str], how: str, env: dict[str, str], options: CheckOptions) -> None:
    with tempfile.TemporaryDirectory(prefix="acp-green-manifest-") as home:
        full_env = {**os.environ, **({} if options.keep_home else {"HOME": home}), **env}
        try:
            agent = _Agent(command, full_env)
        except OSError as exc:
            report.add("start", FAIL, f"cannot start {command[0]}: {exc.strerror or exc}")
            report.skip_rest("the agent did not start")
            return
        answered = False
        try:
            answered = _initialize(report, agent, how, options.timeout)
        finally:
            agent.close(answered)


def _initialize(report: CheckReport, agent: _Agent, how: str, timeout: float) -> bool:
    """Send initialize as the registry's check does and judge the answer; True when one came."""
    request = {"jsonrpc": "2.0", "id": INITIALIZE_ID, "method": "initialize", "params": {
        "protocolVersion": 1,
        "clientCapabilities": CLIENT_CAPABILITIES,
        "clientInfo": {"name": "acp-green manifest --check", "version": "1"},
    }}
    try:
        agent.proc.stdin.write(json.dumps(request).encode() + b"\n")
        agent.proc.stdin.flush()
    except OSError:  # it exited before reading a line: the pipe is closed
        report.add("start", FAIL, f"{agent.ended()} before reading initialize{agent.stderr_tail()}")
        report.skip_rest("the agent did not start")
        return False
    exchange = _read_answer(agent.proc.stdout.fileno(), time.monotonic() + timeout)
    stray = (f"; it wrote {exchange.stray_count} line(s) on stdout that are not JSON-RPC (stdout carries only the "
             f"protocol: log to stderr), first: {_short(repr(exchange.stray[0]))}") if exchange.stray else ""
    message = exchange.answer
    if message is None:
        if exchange.flooded:
            report.add("start", PASS, f"`{' '.join(agent.command)}` is running ({how})")
            report.add("initialize", FAIL, f"no answer in the first {MAX_OUTPUT_BEFORE_ANSWER:,} bytes it wrote on stdout{stray}")
            report.skip_rest("initialize was not answered")
        elif exchange.eof:
            report.add("start", FAIL, f"{agent.ended()} before answering initialize{stray}{agent.stderr_tail()}")
            report.skip_rest("the agent did not start")
        else:
            report.add("start", PASS, f"`{' '.join(agent.command)}` is running ({how})")
            report.add("initialize", FAIL, f"no answer within {timeout:g}s{stray}{agent.stderr_tail()}")
            report.skip_rest("initialize was not answered")
        return False
    report.add("start", PASS, f"`{' '.join(agent.command)}` started ({how})")
    result = message.get("result")
    if "error" in message or not isinstance(result, dict):
        error = message.get("error")
        what = (f"an error {error.get('code')}: {_short(str(error.get('message')))}" if isinstance(error, dict)
                else f"a result that is no object: {_short(repr(result))}")
        report.add("initialize", FAIL, f"answered {what}{stray}")
        report.skip_rest("initialize was not answered with a result")
        return True
    if stray:
        report.add("initialize", FAIL, f"answered, but not alone{stray}")
        report.skip_rest("stdout carried more than the protocol")
        return True
    report.add("initialize", PASS, f"answered in {exchange.answered_after:.2f}s, protocolVersion {_short(repr(result.get('protocolVersion')))}")
    methods: Any = result.get("authMethods")
    problem = auth_problem(methods)
    if problem:
        report.add("authMethods", FAIL, _short(problem))
    else:
        kinds = ", ".join(f"{m.get('id')} ({auth_kind(m)})" for m in methods)
        report.add("authMethods", PASS, _short(f"of a kind the registry accepts: {kinds}"))
    return True


def _read_answer(fd: int, deadline: float) -> _Exchange:
    """Read the agent's stdout until the answer to initialize, EOF, the deadline or the byte bound."""
    exchange, pending, total, started = _Exchange(), b"", 0, time.monotonic()
    os.set_blocking(fd, False)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return exchange
        try:
            wait_read(fd, timeout=remaining)
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            continue
        except (TimeoutError, OSError):
            return exchange
        if not chunk:
            exchange.eof = True
            return exchange
        total += len(chunk)
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            message = _json_rpc(line)
            if message is None and line.strip():
                exchange.stray_count += 1
                if len(exchange.stray) < 3:
                    exchange.stray.append(line[:200])
            elif isinstance(message, dict) and message.get("id") == INITIALIZE_ID and "method" not in message:
                exchange.answer, exchange.answered_after = message, time.monotonic() - started
                return exchange
        if total > MAX_OUTPUT_BEFORE_ANSWER:
            exchange.flooded = True
            if pending and not exchange.stray:
                exchange.stray_count, exchange.stray = 1, [pending[:200]]  # one endless line
            return exchange


def _json_rpc(line: bytes) -> Any:
    """The line's JSON-RPC message, or None when it is none (not JSON, or JSON that is no JSON-RPC object)."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return message if isinstance(message, dict) and message.get("jsonrpc") == "2.0" else None


def _short(text: str, limit: int = 200) -> str:
    """One line of at most `limit` characters: a report line stays a line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit] + f"... ({len(flat):,} characters)"


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def text_report(report: CheckReport) -> list[str]:
    """One line per check: PASS/FAIL/SKIP, the check, the reason."""
    return [f"{line.result} {line.check}: {line.reason}" for line in report.lines]


def json_report(report: CheckReport) -> dict[str, Any]:
    """The report for machines."""
    return {"file": report.file, "ok": report.ok, "command": report.command,
            "checks": [{"check": line.check, "result": line.result, "reason": line.reason} for line in report.lines]}
