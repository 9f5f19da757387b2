"""`acp-green trace replay`: the client side of a trace played against an agent; the same agent
reproduces the trace (a cancel timed after the updates it followed, the agent's own requests
answered from the trace, new session ids), a changed agent is reported where it diverges."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from acp_green.tools.rig.client import AgentProcess, ClientPolicy
from tests.tools.trace_files import (ACP_GREEN, DEMO, agent_line, client_line, demo_run, events_from_records, trace_cli,
                                     write_trace)

STEPS = [*ACP_GREEN, "serve", "--ephemeral", "--agent", "tests.agents:StepsUntilCancelledAgent"]


def replay(path: Path, command: list[str], *options: str) -> tuple[int, dict]:
    done = trace_cli("replay", "--json", *options, str(path), "--", *command, timeout=300)
    assert "Traceback" not in done.stderr, done.stderr
    return done.returncode, json.loads(done.stdout)


@pytest.fixture(scope="module")
def demo_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("replay")
    return demo_run(where / "demo.jsonl", str(where / "written.txt"))


@pytest.fixture(scope="module")
def steps_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A prompt cancelled once the agent had sent its second update (a tool call, after a pause)."""
    agent = AgentProcess(STEPS, ClientPolicy())
    try:
        agent.initialize()
        session = agent.new_session()
        prompt = agent.prompt(session, "go")
        agent.wait_for(lambda: any(u["sessionUpdate"] == "tool_call" for u in agent.updates(session)), what="the tool call")
        agent.cancel(session)
        assert prompt.result()["stopReason"] == "cancelled"
        agent.close_input()
        code = agent.wait_exit()
    finally:
        agent.close()
    return write_trace(tmp_path_factory.mktemp("steps") / "steps.jsonl", events_from_records(agent.records, STEPS, code))


def test_the_demo_reproduces_its_trace(demo_trace: Path):
    """Two sessions (new ids each time), a permission and a file write answered from the trace, a /wait cancelled."""
    code, report = replay(demo_trace, DEMO)
    assert (code, report["divergences"]) == (0, [])
    assert report["ok"] and report["exit"] == 0
    assert report["sent"] == sum(1 for line in demo_trace.read_text().splitlines() if '"from": "client"' in line)


def test_a_cancel_is_sent_after_as_many_updates_as_in_the_trace(steps_trace: Path):
    code, report = replay(steps_trace, STEPS)
    assert (code, report["divergences"]) == (0, [])


def test_a_changed_agent_is_reported_where_it_diverges(demo_trace: Path):
    changed = [*ACP_GREEN, "serve", "--ephemeral", "--agent", "tests.agents:SleepsAfterCancelAgent"]
    code, report = replay(demo_trace, changed, "--timeout", "1")
    assert code == 1
    said = [d["what"] for d in report["divergences"]]
    events = [json.loads(line) for line in demo_trace.read_text().splitlines()]
    cancelled = next(i for i, e in enumerate(events, 1) if e["type"] == "response" and e["payload"] == {"stopReason": "cancelled"})
    assert {"line": cancelled, "what": 'session/prompt #5: the trace has stopReason "cancelled", the agent answered stopReason "end_turn"'} \
        in report["divergences"], said
    assert any(what == "waited for the agent's session/request_permission request the trace has here: not within 1s" for what in said), said
    assert any(what.startswith("session sess_") and "the trace has" in what for what in said), said


def test_an_error_where_the_trace_has_a_result_is_a_divergence(demo_trace: Path):
    failing = [*ACP_GREEN, "serve", "--ephemeral", "--agent", "tests.agents:FailingSessionStartAgent"]
    code, report = replay(demo_trace, failing, "--timeout", "1")
    assert code == 1
    said = [d["what"] for d in report["divergences"]]
    assert "session/new #2: the trace has a result, the agent answered error -32603" in said, said
    assert report["stderr"][-1] == "RuntimeError: session setup failed"  # what the agent said about it


def test_the_text_report_names_the_lines(demo_trace: Path):
    changed = [*ACP_GREEN, "serve", "--ephemeral", "--agent", "tests.agents:SleepsAfterCancelAgent"]
    done = trace_cli("replay", "--timeout", "1", str(demo_trace), "--", *changed, timeout=300)
    assert done.returncode == 1
    first, *rest = done.stdout.splitlines()
    assert first.startswith(f"replayed ") and "divergence(s)" in first
    assert rest and all(line.startswith(("line ", "end: ")) for line in rest), rest


def test_a_hostile_clients_lines_are_sent_again_and_their_answers_counted(demo_trace: Path, tmp_path: Path):
    """Garbage, invalid UTF-8 and JSON nested 10,000 deep go to the agent byte for byte: it answers
    each -32700 as in the trace; a trace with one answer fewer makes the agent's third an extra one."""
    events = [json.loads(line) for line in demo_trace.read_text().splitlines()][:3]  # header, initialize, its answer
    for raw in (b"not json", b"\xff\xfe{", b"[" * 10_000 + b"]" * 10_000):
        events.append(client_line(raw, 1.0))
        events.append(agent_line({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}, 1.0))
    faithful = write_trace(tmp_path / "hostile.jsonl", events)
    code, report = replay(faithful, DEMO, "--timeout", "2")
    assert (code, report["divergences"], report["sent"]) == (0, [], 4)
    del events[-1]
    code, report = replay(write_trace(tmp_path / "one-fewer.jsonl", events), DEMO, "--timeout", "2")
    assert code == 1
    assert {"line": None, "what": "the agent sent 3 answer(s) with id null, the trace has 2"} in report["divergences"]


def test_another_exit_status_is_a_divergence(demo_trace: Path, tmp_path: Path):
    events = [json.loads(line) for line in demo_trace.read_text().splitlines()]
    assert events[-1]["fields"] == {"exit": 0, "signal": None}
    events[-1]["fields"]["exit"] = 3
    code, report = replay(write_trace(tmp_path / "exit3.jsonl", events), DEMO)
    assert code == 1
    assert report["divergences"] == [{"line": len(events), "what": "the agent exited with 0, the trace has 3"}]
