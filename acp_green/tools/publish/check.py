"""`acp-green manifest --check FILE`: what the registry's build and its agent check would find, here.

The checks, in order: the file follows the registry's format; the agent starts from the
manifest's command; it answers `initialize` in time; its `authMethods` hold a kind the registry
accepts. Without the network, a uvx distribution is started from this environment's console
script of the package's name, which `uvx PACKAGE` would run; `command` replaces that (and is the
only way to start an npx or binary one). Like the registry's check, the agent runs with a fresh
empty HOME unless `keep_home`, so it cannot lean on the author's own login or settings.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gevent
from gevent import subprocess

from ..rig.client import AgentProcess, ClientPolicy
from .format import auth_kind, auth_problem, pypi_name, validate

#: What the registry's check sends as a client: a terminal, files, and terminal-auth support.
CLIENT_CAPABILITIES: dict[str, Any] = {
    "terminal": True,
    "fs": {"readTextFile": True, "writeTextFile": True},
    "_meta": {"terminal_output": True, "terminal-auth": True},
}
CHECKS = ("format", "start", "initialize", "authMethods")
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
    name = pypi_name(entry["package"])
    script = local_script(name)
    if script is None:
        return None, (f"no console script {name!r} in this environment (uvx runs the command named after the package): "
                      "install the package here (pip install -e .) or give --command")
    args = [str(arg) for arg in entry.get("args") or []]
    return [script, *args], f"this environment's console script {name} in place of `uvx {entry['package']}` (no network)"


def local_script(name: str) -> str | None:
    """The console script `name` of this interpreter's environment, else the one on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which(name)


def _run_agent(report: CheckReport, command: list[str], how: str, env: dict[str, str], options: CheckOptions) -> None:
    with tempfile.TemporaryDirectory(prefix="acp-green-manifest-") as home:
        full_env = {**os.environ, **({} if options.keep_home else {"HOME": home}), **env}
        try:
            agent = AgentProcess(command, ClientPolicy(capabilities=CLIENT_CAPABILITIES), env=full_env)
        except OSError as exc:
            report.add("start", FAIL, f"cannot start {command[0]}: {exc.strerror or exc}")
            report.skip_rest("the agent did not start")
            return
        answered = False
        try:
            answered = _initialize(report, agent, how, options.timeout)
        finally:
            if not answered:
                _kill_group(agent.pid)  # a silent agent may never read its EOF: do not wait out the grace
            agent.close()


def _initialize(report: CheckReport, agent: AgentProcess, how: str, timeout: float) -> bool:
    """Send initialize as the registry's check does and judge the answer; True when one came."""
    try:
        pending = agent.request("initialize", {
            "protocolVersion": 1,
            "clientCapabilities": CLIENT_CAPABILITIES,
            "clientInfo": {"name": "acp-green manifest --check", "version": "1"},
        })
    except OSError:  # it exited before reading a line: the pipe is closed
        report.add("start", FAIL, f"{_ended(agent)} before reading initialize{_stderr_tail(agent)}")
        report.skip_rest("the agent did not start")
        return False
    gevent.wait([pending.waitable, agent.eof], timeout=timeout, count=1)
    if not pending.done:
        if agent.exited or agent.eof.is_set():
            report.add("start", FAIL, f"{_ended(agent)} before answering initialize{_stderr_tail(agent)}")
            report.skip_rest("the agent did not start")
        else:
            report.add("start", PASS, f"`{' '.join(agent.command)}` is running ({how})")
            report.add("initialize", FAIL, f"no answer within {timeout:g}s{_stderr_tail(agent)}")
            report.skip_rest("initialize was not answered")
        return False
    report.add("start", PASS, f"`{' '.join(agent.command)}` started ({how})")
    message = pending.response(timeout=0)
    result = message.get("result")
    if "error" in message or not isinstance(result, dict):
        error = message.get("error")
        what = f"an error {error.get('code')}: {error.get('message')}" if isinstance(error, dict) else f"a result that is no object: {result!r}"
        report.add("initialize", FAIL, f"answered {what}")
        report.skip_rest("initialize was not answered with a result")
        return True
    elapsed = (pending.answered_at or pending.sent_at) - pending.sent_at
    report.add("initialize", PASS, f"answered in {elapsed:.2f}s, protocolVersion {result.get('protocolVersion')!r}")
    methods: Any = result.get("authMethods")
    problem = auth_problem(methods)
    if problem:
        report.add("authMethods", FAIL, problem)
    else:
        kinds = ", ".join(f"{m.get('id')} ({auth_kind(m)})" for m in methods)
        report.add("authMethods", PASS, f"of a kind the registry accepts: {kinds}")
    return True


def _ended(agent: AgentProcess) -> str:
    try:
        return f"exited (code {agent.proc.wait(timeout=2)})"
    except subprocess.TimeoutExpired:
        return "closed its output"


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _stderr_tail(agent: AgentProcess, lines: int = 5) -> str:
    text = agent.stderr_text(timeout=0.5).strip()
    if not text:
        return ""
    return "; its stderr ends: " + " | ".join(text.splitlines()[-lines:])


def text_report(report: CheckReport) -> list[str]:
    """One line per check: PASS/FAIL/SKIP, the check, the reason."""
    return [f"{line.result} {line.check}: {line.reason}" for line in report.lines]


def json_report(report: CheckReport) -> dict[str, Any]:
    """The report for machines."""
    return {"file": report.file, "ok": report.ok, "command": report.command,
            "checks": [{"check": line.check, "result": line.result, "reason": line.reason} for line in report.lines]}
