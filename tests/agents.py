"""Every test agent, on acp_green's public API: passed to the `inprocess`/`unit` fixtures as
instances, or served in a subprocess with `--agent tests.agents:NAME`.

Each name says what the agent does that the demo agent does not. Agents that break a rule on
purpose without acp_green (to test the rig) live apart, in tests/peer_agents/.
"""

from __future__ import annotations

import itertools
import logging
import os
import subprocess
import sys
import warnings
from typing import Any

import gevent
from gevent.event import Event

from acp_green import Agent, AuthMethod, ExtensionCall, Turn
from acp_green.agent import SelectOption
from acp_green.demo import DemoAgent
from acp_green.mcp import Tool, ToolServer

# -- cancellation and shutdown ---------------------------------------------------------------------


class SleepsAfterCancelAgent(Agent):
    """Says "started"; a prompt `wind down for SECONDS` then waits for cancellation and sleeps
    SECONDS before it answers `cancelled` (a real agent's cleanup). Any other prompt ends at once."""

    name = "sleeps-after-cancel"

    def prompt(self, turn: Turn) -> str:
        turn.say("started")
        if not turn.text.startswith("wind down for "):
            return "end_turn"
        turn.wait_cancelled()
        gevent.sleep(float(turn.text.rsplit(" ", 1)[-1]))
        return "cancelled"


class StepsUntilCancelledAgent(Agent):
    """Says "started", pauses 0.3 s (cancellable), opens a tool call, then waits for cancellation:
    when the cancel comes decides what it sends (a trace replay must time it as recorded)."""

    name = "steps-until-cancelled"

    def prompt(self, turn: Turn) -> str:
        turn.say("started")
        if not turn.sleep(0.3):
            return "cancelled"
        turn.tool_call(title="step", kind="other", status="in_progress")
        turn.wait_cancelled()
        return "cancelled"


class HeldAfterCancelAgent(DemoAgent):
    """The demo agent whose prompts say "working", wait for cancellation, then wait until the test
    sets `release` before they answer `cancelled` (in-process only)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = Event()

    def prompt(self, turn: Turn) -> str:
        turn.say("working")
        turn.wait_cancelled()
        self.release.wait()
        return "cancelled"


class WindsDownUntilFileExistsAgent(Agent):
    """`wind down until PATH`: says "started", waits for cancellation, says "winding down", then
    keeps winding down until PATH exists (the subprocess form of HeldAfterCancelAgent)."""

    name = "winds-down-until-file-exists"

    def prompt(self, turn: Turn) -> str:
        turn.say("started")
        path = turn.text.rsplit(" ", 1)[-1]
        turn.wait_cancelled()
        turn.say("winding down")
        while not os.path.exists(path):
            gevent.sleep(0.02)  # a file another process creates: nothing to wait on but the disk
        return "cancelled"


class IgnoresCancelAgent(DemoAgent):
    """The demo agent, plus `/stubborn`: says "not listening" and never looks at its token, so only
    the kill at the end of the shutdown grace ends it."""

    name = "ignores-cancel"

    def prompt(self, turn: Turn) -> str | None:
        if turn.text.strip() == "/stubborn":
            turn.say("not listening")
            while True:
                gevent.sleep(3600)  # deliberately ignores turn.token
        return super().prompt(turn)


class PromptSwallowsKillAgent(Agent):
    """Every prompt says "stubborn" and swallows whatever is raised in it (bare excepts: the
    kill, and the interrupt after the cancel grace), lingering 3 s more each time: only
    abandoning the greenlet ends the turn."""

    name = "prompt-swallows-kill"

    def prompt(self, turn: Turn) -> str:
        turn.say("stubborn")
        for seconds in (60, 3, 3):
            try:
                gevent.sleep(seconds)
                break
            except BaseException:  # noqa: B036 - what this agent is for
                continue
        return "end_turn"


class ExtensionSwallowsKillAgent(Agent):
    """Prompts say "ok" and end; the extension `_test/linger` swallows its kill once and lingers 2 s."""

    name = "extension-swallows-kill"

    def prompt(self, turn: Turn) -> str:
        turn.say("ok")
        return "end_turn"

    def extension_methods(self) -> dict[str, Any]:
        return {"_test/linger": self.linger}

    def linger(self, call: ExtensionCall) -> dict[str, Any]:
        try:
            gevent.sleep(30)
        except BaseException:  # noqa: B036 - what this agent is for
            gevent.sleep(2)
        return {}


class RaisesAfterCancelAgent(Agent):
    """Sets `started`, waits for cancellation, then fails in its cleanup."""

    def __init__(self) -> None:
        self.started = Event()

    def prompt(self, turn: Turn) -> str:
        self.started.set()
        turn.wait_cancelled()
        raise RuntimeError("cleanup after cancel failed")


class FloodsAfterCancelAgent(Agent):
    """Flushes a large buffer of output after it is cancelled (ACP allows late updates)."""

    name = "floods-after-cancel"

    def prompt(self, turn: Turn) -> str:
        turn.wait_cancelled()
        for i in range(4000):
            turn.say(f"{i}:" + "x" * 1024)
        return "cancelled"


class SessionSetupHeldAgent(DemoAgent):
    """The demo agent whose session setup, once the test sets `entered`, signals it and holds until
    `release` (a control handler that waits)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered: Event | None = None
        self.release = Event()

    def session_started(self, session: Any, snapshot: Any) -> None:
        if self.entered is not None:
            self.entered.set()
            self.release.wait()


# -- what the agent saw --------------------------------------------------------------------------


class SnapshotAcrossPauseAgent(Agent):
    """`_test/snapshot` reports the client info of its snapshot before and after a pause, and
    whether the snapshot's capabilities refused a write (`readOnly`)."""

    def prompt(self, turn: Turn) -> str:
        return "end_turn"

    def extension_methods(self) -> dict[str, Any]:
        return {"_test/snapshot": self.snapshot}

    def snapshot(self, call: ExtensionCall) -> dict[str, Any]:
        before = dict(call.snapshot.client_info)
        gevent.sleep(0.2)  # lets a re-initialize the test wrote run meanwhile
        try:
            call.snapshot.client_capabilities["fs"] = {}
            read_only = False
        except TypeError:
            read_only = True
        return {"before": before, "after": dict(call.snapshot.client_info), "readOnly": read_only}


class SnapshotReporterAgent(Agent):
    """Records the client name of its prompts' snapshots; `_test/snapshot` answers its own."""

    def __init__(self) -> None:
        self.prompt_saw: list[str] = []

    def prompt(self, turn: Turn) -> str:
        self.prompt_saw.append(turn.snapshot.client_info["name"])
        return "end_turn"

    def extension_methods(self) -> dict[str, Any]:
        return {"_test/snapshot": lambda call: {"name": call.snapshot.client_info["name"]}}


class KeepsItsTurnAgent(Agent):
    """Says "in turn" and keeps each Turn in `turns`, so a test can use it after the response."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []

    def prompt(self, turn: Turn) -> str:
        self.turns.append(turn)
        turn.say("in turn")
        return "end_turn"


class AsksTheClientAgent(Agent):
    """Each prompt sends `_test/ask` to the client and says "failed: ERROR" if that request failed."""

    def prompt(self, turn: Turn) -> str:
        try:
            turn.request("_test/ask", {})
        except Exception as exc:  # a ClientError naming what was wrong with the answer
            turn.say(f"failed: {exc}")
        return "end_turn"


class SpeedOptionAgent(DemoAgent):
    """The demo agent with one select config option, `speed` (fast or slow)."""

    config_options = (SelectOption("speed", "Speed", (("fast", "Fast"), ("slow", "Slow")), "fast"),)


class PlantsUnencodableAgent(Agent):
    """Says "ok", then turns its prompt or usage into something JSON cannot carry (chosen by the
    prompt text: prompt-inf, prompt-object, prompt-replaced, usage-inf) and ends `max_tokens`."""

    name = "plants-unencodable"

    def prompt(self, turn: Turn) -> str:
        turn.say("ok")
        if turn.text == "prompt-inf":
            turn.prompt[0]["_meta"] = {"x": float("inf")}
        elif turn.text == "prompt-object":
            turn.prompt.append({"type": "text", "text": object()})
        elif turn.text == "prompt-replaced":
            turn.prompt = object()
        elif turn.text == "usage-inf":
            turn.usage.context_size = float("inf")
        return "max_tokens"


class HoldsAToolCallAgent(Agent):
    """Provides one in-process MCP tool, `probe`/`hold`, that holds until its call is cancelled and
    records whether the token was set when it ended."""

    def __init__(self) -> None:
        self.started = Event()
        self.token_set_when_it_ended: list[bool] = []
        self.tools = ToolServer("probe", [Tool("hold", self._hold)])

    def _hold(self, call: Any) -> str:
        self.started.set()
        try:
            call.token.wait(600)
        finally:
            self.token_set_when_it_ended.append(call.token.is_set())
        return "released"

    def provided_mcp_servers(self) -> list[ToolServer]:
        return [self.tools]

    def prompt(self, turn: Turn) -> str:
        return "end_turn"


# -- the process around the agent ----------------------------------------------------------------


class NoisyAgent(Agent):
    """Prints, logs and lets a child inherit stdio: none of it may reach the wire."""

    name = "noisy"

    def prompt(self, turn: Turn) -> str:
        print("stray print from agent code")
        sys.stdout.write("stray write to sys.stdout\n")
        sys.stdout.flush()
        logging.getLogger("noisy").warning("a log line")
        subprocess.run([sys.executable, "-c", "print('child writing to inherited stdout')"], check=False)
        turn.say("quiet reply")
        return "end_turn"


_stderr_turns = itertools.count()


def _die_in_the_hub(n: int) -> None:
    raise RuntimeError(f"greenlet {n} died (reported by gevent's hub)")


class StderrFloodAgent(Agent):
    """Each turn: a stray print, sys.stdout and sys.stderr writes, a warning, a greenlet that
    dies (the hub prints it), a log line with a traceback, then the turn raises."""

    name = "stderr-flood"

    def prompt(self, turn: Turn) -> str:
        n = next(_stderr_turns)
        print(f"stray print {n} " + "p" * 200)
        sys.stdout.write(f"stray sys.stdout write {n}\n")
        sys.stderr.write(f"stray sys.stderr write {n}\n")
        warnings.warn(f"warning number {n}", RuntimeWarning, stacklevel=1)
        gevent.spawn(_die_in_the_hub, n).join()
        try:
            raise ValueError(f"logged failure {n}")
        except ValueError:
            logging.getLogger("stderr-flood").exception("turn %d logs a traceback", n)
        raise RuntimeError(f"turn {n} fails")


#: Bytes LeaksMemoryAgent keeps per prompt.
LEAK_BYTES = 256 * 1024
_kept: list[bytes] = []


class LeaksMemoryAgent(DemoAgent):
    """The demo agent, but every prompt keeps 256 KiB forever (what the soak must notice)."""

    name = "leaks-memory"

    def prompt(self, turn: Turn) -> str | None:
        _kept.append(os.urandom(LEAK_BYTES))  # random bytes: pages really touched, nothing shared
        return super().prompt(turn)


_stuck = Event()  # never set: what LeaksGreenletsAgent's greenlets wait on


class LeaksGreenletsAgent(DemoAgent):
    """The demo agent, but every prompt leaves a greenlet waiting for ever (what the soak must notice)."""

    name = "leaks-greenlets"

    def prompt(self, turn: Turn) -> str | None:
        gevent.spawn(_stuck.wait)
        return super().prompt(turn)


class PatchReportAgent(Agent):
    """Answers whether gevent monkey-patching is active in its process."""

    name = "patch-report"

    def prompt(self, turn: Turn) -> str:
        from gevent import monkey

        turn.say(f"socket patched: {monkey.is_module_patched('socket')}")
        return "end_turn"


# -- sessions --------------------------------------------------------------------------------------


class NeedsAuthAgent(Agent):
    """Requires `authenticate` before `session/new`."""

    name = "needs-auth"
    auth_methods = (AuthMethod("token", "Token", "A pretend API token"),)

    def prompt(self, turn: Turn) -> str:
        turn.say("authenticated hello")
        return "end_turn"


class FailingSessionStartAgent(Agent):
    """Its session hook raises: session/new must fail and leave nothing behind."""

    name = "failing-session-start"

    def session_started(self, session: Any, snapshot: Any) -> None:
        raise RuntimeError("session setup failed")

    def prompt(self, turn: Turn) -> str:
        return "end_turn"


# -- history and message ids ------------------------------------------------------------------------


class MessageRunsAgent(Agent):
    """Sends a fixed mix of text chunks, thoughts, tool calls, a plan and a usage update, so a test
    can see where each message begins and ends. `MESSAGES` is the agent messages it sends, as texts."""

    name = "message-runs"
    MESSAGES = [["a", "b"], ["t1", "t2"], ["c"], ["d"], ["e"], ["f", "g", "h"]]

    def prompt(self, turn: Turn) -> str:
        turn.say("a")
        turn.say("b")
        turn.think("t1")
        turn.think("t2")
        turn.say("c")
        look = turn.tool_call(title="Look", status="in_progress")
        turn.say("d")
        look.complete()
        turn.say("e")
        turn.plan([{"content": "step", "priority": "low", "status": "pending"}])
        turn.say("f")
        turn.send({"sessionUpdate": "usage_update", "used": 1, "size": 10})  # not a message: no break
        turn.say("g")
        turn.send({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "h"}})
        return "end_turn"


# -- what a turn sends the client ----------------------------------------------------------------


class ReadsUncaughtAgent(Agent):
    """Reads the file its prompt names through the client without catching anything, so a
    client's error reaches the prompt's response; says the content when the read succeeds."""

    name = "reads-uncaught"

    def prompt(self, turn: Turn) -> str:
        turn.say(turn.read_text_file(turn.text.strip()))
        return "end_turn"


class RelativePathsAgent(Agent):
    """Sends a tool call whose location and diff name relative paths (`notes/a.txt`,
    `../b.txt`), then completes it with a relative location and an absolute one."""

    name = "relative-paths"

    def prompt(self, turn: Turn) -> str:
        diff = {"type": "diff", "path": "notes/a.txt", "oldText": None, "newText": "new"}
        turn.tool_call("edit-1", "Edit", kind="edit", status="in_progress",
                       locations=[{"path": "notes/a.txt", "line": 3}, {"path": "../b.txt"}], content=[diff])
        turn.tool_update("edit-1", status="completed", locations=[{"path": "./c.txt"}, {"path": "/abs/d.txt"}])
        return "end_turn"


class LeavesToolCallOpenAgent(Agent):
    """Starts tool call `open-N` (the session's Nth turn here: ids are unique within a session) and
    never finishes it. The prompt text says how the turn ends:
    `return` (end_turn), `raise` (an exception), `stubborn` (ignores cancellation: only the kill
    at the end of the shutdown grace ends it), `content` (gives it content, then returns)."""

    name = "leaves-tool-call-open"

    def prompt(self, turn: Turn) -> str:
        how = turn.text.strip()
        turns = turn.session.state["turns"] = turn.session.state.get("turns", 0) + 1
        tool = turn.tool_call(f"open-{turns}", "Never finished", status="in_progress")
        if how == "content":
            tool.update(content=[{"type": "content", "content": {"type": "text", "text": "partial output"}}])
        elif how == "raise":
            raise RuntimeError("the agent broke mid-tool")
        elif how == "stubborn":
            turn.say("not listening")
            while True:
                gevent.sleep(3600)  # deliberately ignores turn.token
        return "end_turn"


class AsksPermissionAgent(Agent):
    """Each prompt opens a tool call, asks permission for it and says "allowed" or "denied"."""

    def prompt(self, turn: Turn) -> str:
        tool = turn.tool_call(title="Touch /tmp/x", kind="edit", status="pending", locations=["/tmp/x"])
        permission = turn.ask_permission(tool, title="Touch /tmp/x")
        if permission:
            tool.complete()
        turn.say("allowed" if permission else "denied")
        return "end_turn"
