"""A cancel stops plain blocking code: through the real `acp-green serve`, a cancelled turn still
running when the cancel grace (`--cancel-grace`, 0.5 s) ends is interrupted at its blocking call
(acp_green.TurnInterrupted) and answers `cancelled` (S14: once its token is set, `cancelled`
whatever happened after). Cooperative code that ends within the grace is never interrupted.

The model calls are the README's recipe once per HTTP library (tests/blocking_agents.py
ModelCallAgent) against a model that sends one chunk and then nothing (tests/fake_openai.py
`/silent`): without the interrupt each read would wait the full 60 s.
"""

from __future__ import annotations

import os
import sys

import pytest

from tests.fake_openai import FakeOpenAI
from tests.helpers import said, wait_until

SLEEPING = "tests.blocking_agents:SleepingAgent"
MODEL_CALL = "tests.blocking_agents:ModelCallAgent"


@pytest.fixture
def model():
    server = FakeOpenAI()
    yield server
    server.stop()


def start(launch, agent: str, *args: str, env: dict[str, str] | None = None):
    process = launch("--ephemeral", "--agent", agent, *args, env=env)
    process.initialize()
    return process


def cancelled_after(agent, sid: str, text: str, started: str, timeout: float = 30) -> None:
    """Prompt `text`, wait until the turn has said `started`, cancel it: it answers `cancelled`."""
    call = agent.prompt(sid, text)
    agent.wait_for(lambda: said(agent.updates(sid)).endswith(started), what=f"{text!r} to say {started!r}")
    agent.cancel(sid)
    assert call.result(timeout=timeout) == {"stopReason": "cancelled"}


@pytest.mark.parametrize("library", ["urllib", "requests", "httpx", "openai"])
def test_s14_a_cancelled_model_call_that_sends_nothing_is_interrupted_and_answers_cancelled(launch, model, library):
    """The read of a silent model stream is interrupted after the grace; the response is closed,
    the model never finishes its answer, and the session takes its next prompt. openai retries
    on `except Exception`: the interrupt is not one, so it is not retried."""
    agent = start(launch, MODEL_CALL, env={"OPENAI_BASE_URL": model.url})
    sid = agent.new_session()
    call = agent.prompt(sid, f"{library} /silent")
    agent.wait_for(lambda: said(agent.updates(sid)) == "thinking", what=f"the {library} stream's first chunk")
    agent.cancel(sid)
    assert call.result(timeout=30) == {"stopReason": "cancelled"}
    assert len(model.exchanges) == 1, "the interrupted call was retried"
    assert model.exchanges[0].ended != "done"
    assert agent.prompt(sid, f"{library} hello there").result(timeout=30) == {"stopReason": "end_turn"}
    assert said(agent.updates(sid)).endswith("echo: hello there")
    agent.close()
    assert "Traceback" not in agent.stderr_text()


def test_s14_a_cancelled_time_sleep_is_interrupted_and_other_sessions_go_on(launch):
    """time.sleep(60) ends at the interrupt: `awake` is never said, and the turn's usage record
    says `cancelled` (not `aborted`: nothing was killed)."""
    agent = start(launch, SLEEPING)
    sid, other = agent.new_session(), agent.new_session()
    cancelled_after(agent, sid, "long sleep", "sleeping")
    assert said(agent.updates(sid)) == "sleeping"
    assert agent.prompt(other, "hello").result(timeout=30) == {"stopReason": "end_turn"}
    agent.close()


def test_s14_an_interrupt_is_not_swallowed_by_a_retry_loop_that_catches_exception(launch):
    """TurnInterrupted is a BaseException: `except Exception: retry` lets it through, so the turn
    ends at the first interrupt instead of sleeping twice more."""
    agent = start(launch, SLEEPING)
    sid = agent.new_session()
    cancelled_after(agent, sid, "retry", "trying", timeout=15)
    assert said(agent.updates(sid)) == "trying"
    agent.close()


def test_s14_a_cancel_kills_the_child_of_subprocess_run(launch, tmp_path):
    """subprocess.run kills its child on any exception: the interrupt is one, so the shell
    sleeping 60 s is gone (and reaped) once the turn answers `cancelled`."""
    pidfile = tmp_path / "child.pid"
    agent = start(launch, SLEEPING)
    sid = agent.new_session()
    call = agent.prompt(sid, f"child {pidfile}")
    wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), 30, "the child to write its pid")
    pid = int(pidfile.read_text())
    agent.cancel(sid)
    assert call.result(timeout=30) == {"stopReason": "cancelled"}
    wait_until(lambda: not os.path.exists(f"/proc/{pid}"), 30, f"child {pid} to be killed and reaped")
    agent.close()


def test_s14_cooperative_code_that_ends_within_the_grace_is_not_interrupted(launch):
    """`tidy` waits for its cancel, then tidies up for 0.2 s: within a 10 s grace it says so and
    returns by itself."""
    agent = start(launch, SLEEPING, "--cancel-grace", "10")
    sid = agent.new_session()
    cancelled_after(agent, sid, "tidy", "waiting")
    assert said(agent.updates(sid)) == "waitingtidied"
    agent.close()


def test_cancel_grace_inf_never_interrupts(launch):
    """`--cancel-grace inf`: the cancelled time.sleep(3) runs to its end, and only then answers."""
    agent = start(launch, SLEEPING, "--cancel-grace", "inf")
    sid = agent.new_session()
    cancelled_after(agent, sid, "sleep", "sleeping")
    assert said(agent.updates(sid)) == "sleepingawake"
    agent.close()


def test_s8_a_prompt_sent_right_after_a_cancel_never_shows_before_the_cancelled_answer(launch, tmp_path):
    """S8: the cancelled prompt keeps its reservation until its answer is queued, after its turn
    is committed. Prompts sent one after another from the cancel on are refused busy until then:
    no update of a later turn reaches the client before the cancelled answer. Five rounds."""
    import gevent

    agent = launch("--state-dir", str(tmp_path / "state"), "--agent", SLEEPING, "--max-background", "64")
    agent.initialize()
    for round_ in range(5):
        sid = agent.new_session()
        start_at = len(agent.records)
        first = agent.prompt(sid, "wait")
        agent.wait_for(lambda: said(agent.updates(sid)).endswith("waiting"), what=f"round {round_}: the turn to wait")
        agent.cancel(sid)
        later = []
        while not first.done and len(later) < 3000:
            later.append(agent.prompt(sid, "greet"))
            gevent.sleep(0.0005)
        assert first.result(timeout=30) == {"stopReason": "cancelled"}
        for pending in later:
            pending.response(timeout=30)
        lines = [r.message for r in agent.records[start_at:] if r.direction == "in" and isinstance(r.message, dict)]
        answered = next(i for i, m in enumerate(lines) if m.get("id") == first.id)
        early = [m for m in lines[:answered] if m.get("method") == "session/update"
                 and (m["params"]["update"].get("content") or {}).get("text") == "hi there"]
        assert early == [], f"round {round_}: a later turn's update came before the cancelled answer"
    agent.close()


def test_s14_with_no_grace_a_cooperative_turn_is_never_interrupted_in_its_settling(launch, tmp_path):
    """--cancel-grace 0: the interrupt fires on the next loop turn after the cancel. A turn that
    returns by itself first is disarmed before its settle waits for the store: every round is
    answered `cancelled` (an interrupt in the settle would lose the answer)."""
    agent = launch("--state-dir", str(tmp_path / "state"), "--agent", SLEEPING, "--cancel-grace", "0")
    agent.initialize()
    sid = agent.new_session()
    for _round in range(10):
        cancelled_after(agent, sid, "wait", "waiting")
    agent.close()
    assert "Traceback" not in agent.stderr_text()


@pytest.mark.parametrize("grace", ["0.5", "0"])
def test_s13_at_eof_with_equal_graces_every_interrupted_prompt_is_still_answered(launch, tmp_path, grace):
    """S13: at EOF the turns are cancelled; with the shutdown grace equal to the cancel grace the
    interrupts end them just as the drain's wait runs out, while their answers wait for the
    store. The drain waits for a settling turn and never kills it: each is answered `cancelled`."""
    agent = launch("--state-dir", str(tmp_path / "state"), "--agent", SLEEPING, "--shutdown-grace", grace,
                   "--cancel-grace", grace)
    agent.initialize()
    sessions = [agent.new_session() for _ in range(4)]
    calls = [agent.prompt(sid, "long sleep") for sid in sessions]
    for sid in sessions:
        agent.wait_for(lambda sid=sid: said(agent.updates(sid)) == "sleeping", what="every sleep to start")
    agent.close_input()
    assert [call.result(timeout=30) for call in calls] == [{"stopReason": "cancelled"}] * 4
    assert agent.wait_exit() == 0


@pytest.mark.slow
def test_s14_under_cpu_load_every_cancelled_blocking_call_is_still_interrupted_and_answered(launch, tmp_path):
    """Beside two CPU hogs on a 2-core machine: 8 sessions blocked in time.sleep(60) and one in a
    subprocess.run child are cancelled at once; each answers `cancelled`, the child is reaped, and
    every session takes its next prompt. (The figures: scripts/cancel_latency.py.)"""
    import subprocess

    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        agent = launch("--state-dir", str(tmp_path / "state"), "--agent", SLEEPING)
        agent.initialize()
        sleepers = [agent.new_session() for _ in range(8)]
        calls = [agent.prompt(sid, "long sleep") for sid in sleepers]
        pidfile = tmp_path / "child.pid"
        child_session = agent.new_session()
        child_call = agent.prompt(child_session, f"child {pidfile}")
        for sid in sleepers:
            agent.wait_for(lambda sid=sid: said(agent.updates(sid)) == "sleeping", timeout=60, what="every sleep to start")
        wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), 60, "the child to write its pid")
        pid = int(pidfile.read_text())
        for sid in [*sleepers, child_session]:
            agent.cancel(sid)
        assert [call.result(timeout=60) for call in [*calls, child_call]] == [{"stopReason": "cancelled"}] * 9
        wait_until(lambda: not os.path.exists(f"/proc/{pid}"), 60, f"child {pid} to be killed and reaped")
        assert [said(agent.updates(sid)) for sid in sleepers] == ["sleeping"] * 8  # interrupted, never `awake`
        assert [agent.prompt(sid, "greet").result(timeout=60) for sid in sleepers] == [{"stopReason": "end_turn"}] * 8
        agent.close()
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
