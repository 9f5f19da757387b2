"""acp_green.testing, the pytest plugin for agent authors, as an author uses it: each test writes an
author's conftest.py and test file and runs pytest on them in a subprocess (pytester), then
reads the outcomes. A good agent passes in process and as a subprocess; a broken one fails the
author's test itself (not its teardown) with the broken rule named and the offending line quoted;
permissions, files, forms, terminals and a cancel at a chosen moment do what the author scripted."""

from __future__ import annotations

import ast
import importlib.metadata
import os
import sys
from collections.abc import Callable

import pytest

from tests.helpers import REPO, TESTS

pytest_plugins = ["pytester"]

FAULT_AGENT = [sys.executable, str(TESTS / "peer_agents" / "fault_agent.py")]

#: An author's agent, written against the agent API only: each prompt's first word picks a behaviour.
AUTHORS_AGENT = '''
from acp_green import Agent, ClientError, Turn


#: Its own option ids, so that a script answering by kind ("allow") is told from one naming an optionId.
OPTIONS = [{"optionId": "once", "name": "Allow once", "kind": "allow_once"},
           {"optionId": "never", "name": "Reject", "kind": "reject_once"}]


class Helper(Agent):
    name = "helper"

    def prompt(self, turn: Turn) -> str:
        word, _, rest = turn.text.partition(" ")
        if word == "read":  # read PATH [LINE LIMIT]
            path, *window = rest.split()
            call = turn.tool_call(title=f"Read {path}", kind="read", status="in_progress")
            try:
                got = turn.read_text_file(path, **dict(zip(("line", "limit"), map(int, window))))
            except ClientError as exc:
                call.fail(f"unreadable: {exc.explanation}")
                return "end_turn"
            call.complete()
            turn.say(got)
        elif word == "edit":  # edit PATH TEXT: ask, then write
            path, _, text = rest.partition(" ")
            call = turn.tool_call(title=f"Edit {path}", kind="edit")
            if not turn.ask_permission(call, OPTIONS, title=f"Edit {path}", kind="edit").granted:  # the call is failed already
                turn.say("not allowed")
                return "end_turn"
            turn.write_text_file(path, text)
            call.complete()
            turn.say("written")
        elif word == "plan":
            turn.think("thinking it over")
            turn.plan([{"content": "look", "priority": "high", "status": "completed"},
                       {"content": "answer", "priority": "low", "status": "pending"}])
            turn.say("planned")
        elif word == "wait":  # a tool call that runs until the turn is cancelled
            call = turn.tool_call(title="Wait", kind="other", status="in_progress")
            turn.wait_cancelled(60)
            call.fail("cancelled")
            return "cancelled"
        elif word == "ask":
            answer = turn.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
            turn.say(f"{answer.action} {dict(answer.content or {})}")
        elif word == "run":
            with turn.terminal("echo", [rest]) as term:
                status = term.wait_for_exit()
                turn.say(f"{term.output().output.strip()} {status.exit_code}")
        else:
            turn.say(f"you said: {turn.text}")
        return "end_turn"
'''


#: A stdio agent with no runtime under it, which leaves its tool call open when it answers the prompt.
RAW_AGENT = '''
import json, sys

for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method, params = message["method"], message.get("params") or {}
    out = []
    if method == "initialize":
        out.append({"id": message["id"], "result": {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}})
    elif method == "session/new":
        out.append({"id": message["id"], "result": {"sessionId": "s1"}})
    elif method == "session/prompt":
        update = {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Left open", "status": "pending"}
        out.append({"method": "session/update", "params": {"sessionId": "s1", "update": update}})
        out.append({"id": message["id"], "result": {"stopReason": "end_turn"}})
    for answer in out:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", **answer}) + "\\n")
    sys.stdout.flush()
'''


@pytest.fixture
def author(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], pytest.RunResult]:
    """Run an author's test file (its text) with the plugin enabled in their conftest.py and
    their agent in authors_agent.py; the subprocess imports this checkout's acp_green."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    pytester.makeconftest('pytest_plugins = ["acp_green.testing"]\n')
    pytester.makepyfile(authors_agent=AUTHORS_AGENT)

    def run(test_file: str, *args: str) -> pytest.RunResult:
        pytester.makepyfile(test_authors=f"import sys\nFAULT_AGENT = {FAULT_AGENT!r}\n" + test_file)
        return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA", *args, timeout=240)

    return run


def test_a_good_agent_passes_in_process_and_as_a_subprocess_and_its_turn_reads_back(author):
    """In process (the Agent class and an instance) and as a subprocess (`acp-green serve`): the
    turn's text, thoughts and plan read back, a load replays the history, an error answer is
    RpcErrorResponse; nothing is broken, so all pass."""
    result = author('''
import pytest
from authors_agent import Helper
from acp_green.testing import RpcErrorResponse


def test_in_process(acp_connect):
    client = acp_connect(Helper)
    assert client.initialize_result["protocolVersion"] == 1
    sid = client.new_session()
    turn = client.prompt(sid, "hello")
    assert (turn.stop_reason, turn.text, turn.error) == ("end_turn", "you said: hello", None)
    turn = client.prompt(sid, "plan")
    assert turn.thoughts == "thinking it over" and turn.text == "planned"
    assert [e["content"] for e in turn.plan] == ["look", "answer"]
    assert turn.updates_of("plan")[0]["entries"] == turn.plan
    replayed = client.load_session(sid)
    assert [u["content"]["text"] for u in replayed if u["sessionUpdate"].endswith("message_chunk")] == [
        "hello", "you said: hello", "plan", "planned"]
    with pytest.raises(RpcErrorResponse) as refused:
        client.call("no/such_method", {})
    assert refused.value.code == -32601


def test_an_instance_as_a_subprocess_too(acp_connect):
    served = acp_connect(Helper())
    command = acp_connect([sys.executable, "-m", "acp_green", "serve", "--ephemeral"])
    for client in (served, command):
        sid = client.new_session()
        assert client.prompt(sid, "hi").stop_reason == "end_turn"
    assert command.prompt(command.new_session(), "/fail").error["code"] == -32603
    assert any(m.get("method") == "session/update" for m in command.received)
''')
    result.assert_outcomes(passed=2)


def test_a_broken_agent_fails_the_authors_test_naming_the_rule_and_quoting_the_line(author):
    """An agent that answers a notification, and one that sends an update after its prompt's
    response: the author's test FAILS (not an error at teardown) naming the invariant and its
    rule, quoting the offending line; the agent's stderr tail is shown when it wrote any."""
    result = author('''
def test_notification_answered(acp_connect):
    client = acp_connect([*FAULT_AGENT, "--answer-notifications"])
    sid = client.new_session()
    client.cancel(sid)


def test_update_after_response(acp_connect):
    client = acp_connect([*FAULT_AGENT, "--update-after-response"])
    assert client.prompt(client.new_session(), "hello").text == "hello"
''')
    result.assert_outcomes(failed=2, errors=0)
    shown = result.stdout.str()
    notification, late = shown.split("_ test_update_after_response _")
    assert "fault_agent.py --answer-notifications broke 2 ACP rule(s)" in notification
    assert ("no_response_to_notification (S6: a notification is never answered): a response answers no request"
            in notification)
    assert 'client->agent] {"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":' in notification
    assert 'agent->client] {"jsonrpc":"2.0","id":null,"result":{}}' in notification
    assert ("no_update_after_response (S5: nothing is sent for a session after its prompt's response): "
            "a agent_message_chunk update for") in late
    assert 'agent->client] {"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}' in late
    assert '"text":"one more thing"' in late


def test_a_test_that_raised_still_has_its_agent_checked_at_teardown(author):
    """The test's own failure is reported, and what the agent broke comes as the teardown's error."""
    result = author('''
def test_raises(acp_connect):
    client = acp_connect([*FAULT_AGENT, "--answer-notifications"])
    client.cancel(client.new_session())
    assert False, "the author's own assertion"
''')
    result.assert_outcomes(failed=1, errors=1)
    shown = result.stdout.str()
    assert "AssertionError: the author's own assertion" in shown
    assert "ERROR at teardown of test_raises" in shown and "no_response_to_notification (S6" in shown


def test_an_agent_that_dies_fails_at_once_showing_its_stderr(author):
    """A command that exits without answering fails at once, not after the timeout, with its
    stderr; the unanswered initialize is then reported at teardown."""
    result = author('''
def test_dies(acp_connect):
    acp_connect([sys.executable, "-c", "import sys; sys.stderr.write('no model configured\\\\n')"], timeout=60)
''')
    result.assert_outcomes(failed=1, errors=1)
    shown = result.stdout.str()
    # Whichever comes first: the agent's exit closes its input (the request cannot be written) or its output.
    assert ("the agent closed its output without answering initialize #1; its stderr ends:" in shown
            or "the agent stopped reading its input before initialize #1 could be sent; its stderr ends:" in shown)
    assert "    no model configured" in shown and "initialize #1 never got a response" in shown
    assert result.duration < 30


def test_permissions_are_answered_as_scripted(author):
    """"allow" writes the file; "reject" does not; a callable sees the request and answers by kind
    ("allow"), by optionId, or None for cancelled; a callable that raises or names no option
    fails the test as the test's own mistake."""
    result = author('''
import pytest
from authors_agent import Helper


@pytest.mark.parametrize("answer, said", [("allow", "written"), ("reject", "not allowed")])
def test_words(acp_connect, answer, said):
    client = acp_connect(Helper, permissions=answer)
    target = client.workspace / "out.txt"
    turn = client.prompt(client.new_session(), f"edit {target} new text")
    assert turn.text == said
    assert len(turn.permission_requests) == 1 and turn.permission_requests[0]["toolCall"]["title"] == f"Edit {target}"
    assert client.written == ({str(target): "new text"} if answer == "allow" else {})
    assert turn.tool_calls[0].status == ("completed" if answer == "allow" else "failed")


def test_callable(acp_connect):
    asked = []

    def decide(request):
        asked.append(request["toolCall"]["title"])
        title = request["toolCall"]["title"]
        return "allow" if "yes" in title else "never" if "no" in title else None

    client = acp_connect(Helper, permissions=decide)
    sid = client.new_session()
    assert client.prompt(sid, f"edit {client.workspace}/yes.txt 1").text == "written"
    refused = client.prompt(sid, f"edit {client.workspace}/no.txt 2")
    cancelled = client.prompt(sid, f"edit {client.workspace}/other.txt 3")
    assert "Permission denied" in str(refused.tool_calls[0].content)
    assert "cancelled by the client" in str(cancelled.tool_calls[0].content)
    assert asked == [f"Edit {client.workspace}/{name}.txt" for name in ("yes", "no", "other")]
    assert list(client.written) == [f"{client.workspace}/yes.txt"]


def test_callable_that_raises(acp_connect):
    def decide(request):
        raise LookupError("no answer scripted")

    client = acp_connect(Helper, permissions=decide)
    assert client.prompt(client.new_session(), f"edit {client.workspace}/x 1").text == "not allowed"


def test_callable_that_names_no_option(acp_connect):
    client = acp_connect(Helper, permissions=lambda request: "maybe")
    assert client.prompt(client.new_session(), f"edit {client.workspace}/x 1").text == "not allowed"
''')
    result.assert_outcomes(passed=3, failed=2)
    shown = result.stdout.str()
    assert "the test's own script: the permissions callable raised LookupError: no answer scripted" in shown
    assert "the test's own script: the permissions callable answered 'maybe', which is neither" in shown


def test_files_are_served_from_the_workspace_and_nowhere_else(author):
    """`files` are written into the workspace and served from it (line and limit honoured); a
    path outside it is refused, so the agent's tool call fails, and so is a file that is no
    UTF-8 text (answered, the client reads on); `files` cannot name a path outside it; `cwd`
    moves the workspace."""
    result = author('''
import pytest
from authors_agent import Helper


def test_read(acp_connect, tmp_path):
    client = acp_connect(Helper, files={"src/app.py": "one\\ntwo\\nthree\\n"})
    sid = client.new_session()
    path = client.workspace / "src" / "app.py"
    assert client.prompt(sid, f"read {path}").text == "one\\ntwo\\nthree\\n"
    assert client.prompt(sid, f"read {path} 2 1").text == "two\\n"
    outside = tmp_path / "secret.txt"
    outside.write_text("not yours")
    turn = client.prompt(sid, f"read {outside}")
    assert turn.text == "" and turn.tool_calls[0].status == "failed"
    assert "outside the test's directory" in str(turn.tool_calls[0].content)
    (client.workspace / "binary").write_bytes(b"\\xff\\xfe")
    unreadable = client.prompt(sid, f"read {client.workspace}/binary")
    assert unreadable.tool_calls[0].status == "failed" and "cannot read" in str(unreadable.tool_calls[0].content)
    with pytest.raises(ValueError, match="not a path inside"):
        acp_connect(Helper, files={"../escape.txt": "x"})


def test_cwd(acp_connect, tmp_path):
    client = acp_connect(Helper, cwd=str(tmp_path), files={"a.txt": "A"})
    assert client.workspace == tmp_path and (tmp_path / "a.txt").read_text() == "A"
    assert client.prompt(client.new_session(), f"read {tmp_path}/a.txt").text == "A"
''')
    result.assert_outcomes(passed=2)


def test_cancel_at_the_first_tool_call(author):
    """start_prompt, wait for the first tool call, cancel: the turn ends `cancelled` with its tool
    call failed; waiting for an update the turn never sends fails naming the predicate."""
    result = author('''
import pytest
from authors_agent import Helper


def test_cancel(acp_connect):
    client = acp_connect(Helper)
    sid = client.new_session()
    running = client.start_prompt(sid, "wait")
    first = running.wait_for_update("tool_call")
    assert first["title"] == "Wait" and not running.done
    running.cancel()
    turn = running.wait()
    assert turn.stop_reason == "cancelled"
    assert [(c.title, c.status) for c in turn.tool_calls] == [("Wait", "failed")]
    assert client.prompt(sid, "again").text == "you said: again"


def test_no_such_update(acp_connect):
    client = acp_connect(Helper)
    running = client.start_prompt(client.new_session(), "hello")
    with pytest.raises(AssertionError, match="the turn ended .* with no update matching 'tool_call'"):
        running.wait_for_update("tool_call")
''')
    result.assert_outcomes(passed=2)


def test_forms_and_terminals(author):
    """Elicitation answers in order (then decline) or by a callable (one that answers no result
    object fails the test); the agent's terminal runs on this machine and the test sees it."""
    result = author('''
from authors_agent import Helper


def test_forms(acp_connect):
    client = acp_connect(Helper, elicitation=[{"action": "accept", "content": {"name": "Ada"}}])
    sid = client.new_session()
    assert client.prompt(sid, "ask").text == "accept {'name': 'Ada'}"
    assert client.prompt(sid, "ask").text == "decline {}"
    by_callable = acp_connect(Helper, elicitation=lambda request: {"action": "accept", "content": {"name": request["message"]}})
    assert by_callable.prompt(by_callable.new_session(), "ask").text == "accept {'name': 'Your name?'}"


def test_a_form_callable_answering_nonsense(acp_connect):
    client = acp_connect(Helper, elicitation=lambda request: "yes")
    assert client.prompt(client.new_session(), "ask").stop_reason == ""


def test_terminal(acp_connect):
    client = acp_connect(Helper)
    assert client.prompt(client.new_session(), "run hi").text == "hi 0"
    assert [t.argv for t in client.terminals] == [["echo", "hi"]] and client.terminals[0].released
''')
    result.assert_outcomes(passed=2, failed=1)
    assert "the test's own script: the elicitation callable answered 'yes', not a result object" in result.stdout.str()


def test_the_entry_point_and_the_conftest_line_together_load_the_plugin_once(author):
    """setup.py registers the `pytest11` entry point `acp_green`, a module that loads the plugin
    under its own name: loading it (as the entry point would) beside the author's conftest line
    is no "already registered" error, and the fixture works."""
    tree = ast.parse((REPO / "setup.py").read_text())
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup")
    entry_points = ast.literal_eval(next(k.value for k in call.keywords if k.arg == "entry_points"))
    assert entry_points["pytest11"] == ["acp_green = acp_green.testing.entry_point"]
    # Installed with this entry point, pytest loads it by itself; else it is loaded here as pytest would.
    installed = any(e.value == "acp_green.testing.entry_point" for e in importlib.metadata.entry_points(group="pytest11", name="acp_green"))
    result = author('''
from authors_agent import Helper


def test_once(acp_connect, pytestconfig):
    assert pytestconfig.pluginmanager.has_plugin("acp_green.testing")
    assert pytestconfig.pluginmanager.has_plugin("acp_green") or pytestconfig.pluginmanager.has_plugin("acp_green.testing.entry_point")
    client = acp_connect(Helper)
    assert client.prompt(client.new_session(), "x").text == "you said: x"
''', *([] if installed else ["-p", "acp_green.testing.entry_point"]))
    result.assert_outcomes(passed=1)


def test_run_probe_passes_the_demo_and_names_what_a_broken_agent_broke():
    """run_probe: the same checks as `acp-green probe`, a verdict, the table and the failures."""
    from acp_green.testing import run_probe

    good = run_probe([sys.executable, "-m", "acp_green", "serve", "--ephemeral"], only=["notifications unanswered"])
    assert good.ok and good.failures == [] and "notifications unanswered" in good.report
    bad = run_probe([*FAULT_AGENT, "--answer-notifications"], only=["notifications unanswered"])
    assert not bad.ok
    assert any(f.startswith("no response to a notification: ") and '"id":null' in f for f in bad.failures), bad.failures


#: A stdio agent that never answers a prompt, cancelled or not.
SILENT_AGENT = RAW_AGENT.replace('    elif method == "session/prompt":', '    elif method == "session/prompt":\n        continue')


def test_waiting_on_a_cancelled_prompt_never_answered_names_the_rule_in_the_failure(author, pytester):
    """The test's own wait times out on a cancelled prompt the agent never answers: the failure
    names the rule it breaks, and the check at teardown reports the missing response."""
    pytester.makepyfile(silent_agent=SILENT_AGENT)
    result = author('''
def test_cancel(acp_connect):
    client = acp_connect([sys.executable, "silent_agent.py"], timeout=2)
    running = client.start_prompt(client.new_session(), "x")
    running.cancel()
    running.wait()
''')
    result.assert_outcomes(failed=1, errors=1)
    out = result.stdout.str()
    assert "timed out after 2s waiting for the answer to session/prompt #3; it was cancelled" in out
    assert "cancelled_answers_cancelled (S14: a cancelled prompt is still answered" in out
    assert "one_response_per_request" in out and "session/prompt #3 never got a response" in out


#: A stdio agent that sends the same unknown notification three times before answering initialize.
REPEATING_AGENT = RAW_AGENT.replace('    if method == "initialize":',
                                    '    if method == "initialize":\n        out += [{"method": "x/unknown"}] * 3')


def test_the_same_break_seen_again_is_counted_not_repeated(author, pytester):
    pytester.makepyfile(repeating_agent=REPEATING_AGENT)
    result = author('''
def test_connect(acp_connect):
    acp_connect([sys.executable, "repeating_agent.py"])
''')
    result.assert_outcomes(failed=1)
    # Only the failure's own report is counted: pytest repeats the message in full in the short
    # summary when it runs under CI (the CI variable is set), and truncates it otherwise.
    report = result.stdout.str().split("short test summary info")[0]
    assert "broke 1 ACP rule(s)" in report and "(seen 3 times)" in report
    assert report.count("unknown method 'x/unknown'") == 1, report


def test_run_probe_authenticates_an_agent_that_requires_a_login():
    """An agent with auth_methods (as the registry requires) refuses sessions until `authenticate`:
    run_probe(authenticate=ID) sends it, as `acp-green probe --authenticate ID` does."""
    from acp_green.testing import run_probe

    command = [sys.executable, "-m", "acp_green", "serve", "--ephemeral", "--agent", "tests.agents:NeedsAuthAgent"]

    def row(result, check: str) -> str:
        return next(line for line in result.report.splitlines() if line.startswith(check))

    refused = run_probe(command, only=["exit on EOF"])
    assert "SKIP" in row(refused, "authentication") and "auth_" in refused.report
    logged_in = run_probe(command, only=["exit on EOF"], authenticate="token")
    assert logged_in.ok and "PASS" in row(logged_in, "authentication"), logged_in.report
    assert "authenticate(token), then" in row(logged_in, "authentication")


def test_what_clients_trip_on_is_a_warning_unless_made_an_error(author, pytester):
    """A tool call still open when its prompt is answered breaks no ACP rule: an AcpAdvisory
    warning naming it, which `-W error::acp_green.testing.AcpAdvisory` makes a failure."""
    pytester.makepyfile(raw_agent=RAW_AGENT)
    test_file = '''
def test_open_tool_call(acp_connect):
    client = acp_connect([sys.executable, "raw_agent.py"])
    assert client.prompt(client.new_session(), "x").tool_calls[0].status == "pending"
'''
    warned = author(test_file)
    warned.assert_outcomes(passed=1, warnings=1)
    assert "AcpAdvisory" in warned.stdout.str() and "tool_calls_finished: the prompt answered with tool calls still open: t1" in warned.stdout.str()
    author(test_file, "-W", "error::acp_green.testing.AcpAdvisory").assert_outcomes(failed=1)
