"""`acp-green trace check`: every message of a trace against the ACP schemas and the rig's invariants.

The invariants are the rig's own (`tools/rig/invariants.InvariantChecker`, fed the trace's events
as the rig's records), so a trace is judged exactly like a probe or soak run; what the client
wrote is validated too. Each finding names the lines of the file that prove it: the checker's
findings go to a `LineFindings`, which keeps them as `Finding`s with their lines.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...errors import RpcError
from ...rpc.wire import decode_value
from ..rig.client import Record
from ..rig.invariants import Findings, InvariantChecker
from ..rig.schema import AcpSchema, StreamChecker, default_schema, message_kind
from ..rig.schema_v2 import schema_for_version
from .read import FORMAT, Note, Trace, WireEvent, visible

__all__ = ["CheckReport", "Finding", "check_trace", "connections", "json_report", "quote", "render_line", "text_report"]

MAX_FINDINGS = 1000  # per connection and kind: a broken agent repeats itself
_EXCERPT = 160


@dataclass(frozen=True, slots=True)
class Finding:
    """One broken rule and the lines of the file that show it."""

    side: str  # whose fault: "agent", "client", or "trace" (the file itself)
    rule: str  # an invariant's name (tools/rig/invariants.INVARIANTS, ADVISORIES), "schema" or "unreadable_line"
    detail: str
    lines: tuple[int, ...]


@dataclass(slots=True)
class CheckReport:
    """What `trace check` found in one trace."""

    violations: list[Finding] = field(default_factory=list)
    advisories: list[Finding] = field(default_factory=list)  # what real clients trip on, never a failure
    notes: list[str] = field(default_factory=list)  # what was not checked, and why
    versions: list[Any] = field(default_factory=list)  # the protocolVersion each connection negotiated
    messages: int = 0

    @property
    def ok(self) -> bool:
        return not self.violations


@dataclass(slots=True)
class Connection:
    """The wire events between two peers; `client` is the side that sends initialize."""

    client: str
    agent: str
    events: list[WireEvent] = field(default_factory=list)


def connections(trace: Trace) -> list[Connection]:
    """The trace's connections, one per pair of peers, in order of first appearance."""
    found: dict[frozenset[str], Connection] = {}
    for event in trace.wire:
        pair = frozenset((event.sender, event.receiver))
        if pair not in found:
            client, agent = _roles(event.sender, event.receiver)
            found[pair] = Connection(client, agent)
        found[pair].events.append(event)
    return list(found.values())


def _roles(a: str, b: str) -> tuple[str, str]:
    """(client, agent) of a pair: "client" is always the client, "agent" always the agent, and
    between proxies ("proxy:N") the lower N is nearer the client."""
    def rank(name: str) -> tuple[int, str]:
        if name == "client":
            return (0, "")
        if name == "agent":
            return (2, "")
        return (1, name.rjust(12))
    return (a, b) if rank(a) <= rank(b) else (b, a)


class LineFindings(Findings):
    """The rig checker's findings kept as `Finding`s naming the lines of the file that broke each
    rule (its `violations` and `advisories` stay empty); schema findings only when `keep_schema`."""

    def __init__(self, lines: dict[int, int], keep_schema: bool) -> None:
        super().__init__(MAX_FINDINGS)
        self._lines = lines  # id(record) -> its line in the file
        self._keep_schema = keep_schema
        self.found: list[Finding] = []
        self.advised: list[Finding] = []

    def _where(self, records: Sequence[Record | None]) -> tuple[int, ...]:
        return tuple(sorted({self._lines[id(r)] for r in records if r is not None and id(r) in self._lines}))

    def add(self, invariant: str, detail: str, records: Sequence[Record | None] = ()) -> None:
        if (invariant != "schema" or self._keep_schema) and len(self.found) < MAX_FINDINGS:
            self.found.append(Finding("agent", invariant, detail, self._where(records)))

    def advise(self, advisory: str, detail: str, records: Sequence[Record | None] = ()) -> None:
        if len(self.advised) < MAX_FINDINGS:
            self.advised.append(Finding("agent", advisory, detail, self._where(records)))


def check_trace(trace: Trace, long_prompts: Sequence[str] = ()) -> CheckReport:
    """Check every connection of a trace; `long_prompts`: prompt texts that end only when cancelled."""
    report = CheckReport()
    for damage in trace.damaged:
        report.violations.append(Finding("trace", "unreadable_line", damage.reason, (damage.line,)))
    header = trace.header
    if header is not None and header.get("format") != FORMAT:
        report.notes.append(f"the trace says its format is {json.dumps(header.get('format'))[:60]}: read as {FORMAT}")
    complete: bool | str = "read" if trace.footer is not None else False
    for connection in connections(trace):
        _check_connection(connection, report, long_prompts, complete)
    if not trace.wire:
        report.notes.append("the trace holds no message")
    report.violations.sort(key=_headline)
    report.advisories.sort(key=_headline)
    return report


def _headline(finding: Finding) -> int:
    """The line a finding is reported at: the last of its lines, the one that broke the rule."""
    return finding.lines[-1] if finding.lines else 1 << 62


def _check_connection(connection: Connection, report: CheckReport, long_prompts: Sequence[str], complete: bool | str) -> None:
    version = _negotiated(connection.events)
    report.versions.append(version)
    schema, note = schema_for(version)
    where = "" if (connection.client, connection.agent) == ("client", "agent") else f" ({connection.client} -> {connection.agent})"
    if note:
        report.notes.append(note + where)
    lines: dict[int, int] = {}
    records: list[Record] = []
    must_cancel = [e.id for e in connection.events
                   if e.sender == connection.client and e.method == "session/prompt" and _prompt_text(e.params) in long_prompts]
    kept = LineFindings(lines, keep_schema=schema is not None)
    # ACP's rule, not acp_green's stricter one: session-level updates may come between turns.
    checker = InvariantChecker(must_cancel_ids=must_cancel, session_updates_between_turns=True, findings=kept)
    client_schema = StreamChecker("client", schema) if schema is not None else None
    found: list[Finding] = []
    for position, event in enumerate(connection.events):
        from_client = event.sender == connection.client
        record = Record(event.ts, "out" if from_client else "in", event.raw or b"", event.message)
        if from_client and _refused_as_garbage(connection, position):
            checker.allow_null_answer()  # its -32700 with id null is the right answer
            record = Record(event.ts, "out", b"", None)  # not read again, leniently, as the message it is not
        lines[id(record)] = event.line
        records.append(record)
        report.messages += 1
        if from_client:
            found.extend(_client_findings(event, client_schema, version))
        elif client_schema is not None:
            for message in event.message if event.kind == "batch" else [event.message]:
                if isinstance(message, dict):
                    client_schema.observe(message, from_sender=False)
        try:
            checker.update(records)
        except Exception as exc:  # noqa: BLE001 - the rig's checker follows live agents; a shape it cannot follow must not end the check
            found.append(Finding("agent" if not from_client else "client", "unfollowable",
                                 f"the invariant checker cannot follow this message ({type(exc).__name__}: {exc})", (event.line,)))
    checker.finish(records, complete=complete)
    report.violations.extend(found[:MAX_FINDINGS])
    report.violations.extend(kept.found)
    report.advisories.extend(kept.advised)


def _refused_as_garbage(connection: Connection, position: int) -> bool:
    """Whether a client line is garbage to the agent although the invariant checker's lenient
    json.loads reads a message in it: the strict decoder (acp_green's, the trace reader's) refuses
    it (nested deeper than it takes, a number too large), so an agent answers it -32700 with id
    null; an agent whose parser takes it and answers the request's id is judged on that instead."""
    event = connection.events[position]
    if event.kind != "line" or event.message is not None or not event.raw:
        return False
    try:
        decode_value(event.raw)
        return False  # the decoder reads it: the checker sees it as the decoder does
    except RpcError:
        pass
    try:
        value = json.loads(event.raw)
    except (ValueError, RecursionError):
        return False  # garbage to both: the checker allows its null answer itself
    members = value if isinstance(value, list) else [value]
    asked = {json.dumps(m.get("id")) for m in members if isinstance(m, dict) and "method" in m and m.get("id") is not None}
    if not asked:
        return True  # no request in it: nothing an agent could answer by id
    for later in connection.events[position + 1:]:
        if later.sender == connection.agent:
            answers = later.message if later.kind == "batch" and isinstance(later.message, list) else [later.message]
            if any(isinstance(a, dict) and "method" not in a and json.dumps(a.get("id")) in asked for a in answers):
                return False
    return True


def _client_findings(event: WireEvent, schema: StreamChecker | None, version: Any) -> list[Finding]:
    """What the client broke in one line: a batch is judged member by member under v2, and is one
    violation under v1 (which has no batches); the agent's batches are the invariant checker's."""
    if event.kind == "batch":
        if not (isinstance(version, int) and not isinstance(version, bool) and version >= 2):
            return [Finding("client", "valid_json_rpc", "the client wrote a batch (JSON array), which ACP v1 does not allow",
                            (event.line,))]
        found = []
        for member in event.message:
            if message_kind(member) is None:
                found.append(Finding("client", "valid_json_rpc", "a member of the client's batch is no JSON-RPC message",
                                     (event.line,)))
            elif schema is not None and (problems := schema.observe(member, from_sender=True)):
                found.append(Finding("client", "schema", "; ".join(problems[:3]), (event.line,)))
        return found
    if not isinstance(event.message, dict):
        return [Finding("client", "valid_json_rpc", f"the client wrote a line that is no JSON-RPC message: {event.why}", (event.line,))]
    problems = schema.observe(event.message, from_sender=True) if schema is not None else []
    return [Finding("client", "schema", "; ".join(problems[:3]), (event.line,))] if problems else []


def _negotiated(events: Sequence[WireEvent]) -> Any:
    """The protocolVersion the agent's answer to initialize names (None: no answer in the trace)."""
    asked = {json.dumps(e.id) for e in events if e.kind == "request" and e.method == "initialize"}
    for event in events:
        if event.kind == "response" and json.dumps(event.id) in asked and isinstance(event.message.get("result"), dict):
            return event.message["result"].get("protocolVersion")
    return None


def schema_for(version: Any) -> tuple[AcpSchema | None, str | None]:
    """The schema a negotiated version is validated against (None: none here), and a note when it is not plain v1."""
    if version is None:
        return default_schema(), "no answer to initialize in the trace: validated against ACP v1"
    schema = schema_for_version(version)
    if schema is None:
        return None, f"not checked: no ACP schema here for protocolVersion {json.dumps(version)[:40]}: invariants only"
    if version == 1:
        return schema, None
    return schema, f"protocolVersion {version}: validated against the ACP v{version} draft schema"


def _prompt_text(params: Any) -> str:
    blocks = params.get("prompt") if isinstance(params, dict) else None
    if not isinstance(blocks, list):
        return ""
    return "".join(b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)).strip()


# -- output ----------------------------------------------------------------------------------------


def render_line(trace: Trace, number: int, limit: int = _EXCERPT) -> str | None:
    """One line of the file in a few words: who wrote what (None for a blank line)."""
    found = trace.at(number)
    if found is None:
        return None
    if isinstance(found, WireEvent):
        text = f"{found.sender}->{found.receiver} {found.text()}"
    elif isinstance(found, Note):
        text = f"[{found.component} {found.level}] {found.message}"
    else:
        text = f"unreadable: {found.excerpt}"
    text = visible(text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def quote(trace: Trace, lines: Sequence[int]) -> list[tuple[int, bool, str]]:
    """(line, is one of `lines`, text) for `lines` and the line before and after each."""
    shown = sorted({n for line in lines for n in (line - 1, line, line + 1) if 1 <= n <= trace.lines})
    quoted = []
    for number in shown:
        text = render_line(trace, number)
        if text is not None:
            quoted.append((number, number in lines, text))
    return quoted


def text_report(path: str, trace: Trace, report: CheckReport) -> list[str]:
    """The report for a person: a summary line, then each finding quoted with its lines."""
    verdict = "OK" if report.ok else f"{len(report.violations)} problem(s)"
    if report.advisories:
        verdict += f", {len(report.advisories)} advisory warning(s)"
    out = [f"{visible(path)}: {verdict} in {report.messages} messages ({trace.lines} lines)"]
    out.extend(f"note: {note}" for note in report.notes)
    for title, findings in (("", report.violations), ("advisory ", report.advisories)):
        for finding in findings:
            first = f"line {_headline(finding)}" if finding.lines else "end of trace"
            out.append("")
            out.append(f"{first}: {title}[{finding.side}] {finding.rule}: {visible(finding.detail)}")
            previous = None
            for number, marked, text in quote(trace, finding.lines):
                if previous is not None and number > previous + 1:
                    out.append("    " + " " * 6 + "  ...")
                out.append(f"  {'>' if marked else ' '} {number:>6}  {text}")
                previous = number
    return out


def json_report(path: str, trace: Trace, report: CheckReport) -> dict[str, Any]:
    """The report for a machine."""
    def finding(f: Finding) -> dict[str, Any]:
        context = [{"line": n, "marked": m, "text": t} for n, m, t in quote(trace, f.lines)]
        return {"side": f.side, "rule": f.rule, "detail": f.detail, "lines": list(f.lines), "context": context}
    return {"file": path, "ok": report.ok, "messages": report.messages, "lines": trace.lines,
            "protocolVersions": report.versions, "notes": report.notes,
            "violations": [finding(f) for f in report.violations], "advisories": [finding(f) for f in report.advisories]}
