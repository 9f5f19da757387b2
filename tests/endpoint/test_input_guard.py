"""Hostile input in-process: ill-typed fields answer -32602, a line whose handling fails is
answered once by the last-resort guard, and a finished turn always leaves its usage record (S16)."""

from __future__ import annotations

import json
import time

import pytest
from gevent import GreenletExit
from gevent.greenlet import Greenlet

from acp_green.rpc import endpoint as endpoint_module, wire
from acp_green.protocol.session_methods import encode_cursor
from acp_green.demo import DemoAgent
from acp_green.rpc.endpoint import Endpoint, Kind, Route
from acp_green.tools.rig.client import ClientPolicy, Record
from acp_green.usage import RUNNING
from tests.agents import AsksTheClientAgent, PlantsUnencodableAgent, SpeedOptionAgent
from tests.helpers import chunk_texts
from tests.unit_harness import UnitConnection


def start(inprocess, agent=None, policy=None, **options):
    harness = inprocess(agent or DemoAgent(), policy, **options)
    harness.client.initialize()
    return harness


def responses(client, request_id=None):
    """Responses the client received (no method), optionally only those with `request_id`."""
    found = [m for m in client.received() if "method" not in m and ("result" in m or "error" in m)]
    if request_id is not None:
        found = [m for m in found if "id" in m and m["id"] == request_id and type(m["id"]) is type(request_id)]
    return found


def send_raw_request(client, request_id, method: str, data: bytes, stand_in: dict) -> None:
    """Write a hand-made request line; record a schema-valid stand-in of it so the teardown's
    schema check knows which request the response answers."""
    client.records.append(Record(time.monotonic(), "out", b"", client.make_request(method, stand_in, request_id)))
    client.send_raw(data)


# -- unrepresentable numbers (valid JSON) ------------------------------------------------------------
def test_request_with_non_finite_number_in_params_is_invalid_params_naming_the_field(inprocess):
    """A prompt block carrying 1e400 is -32602 with the id echoed and data.field; the
    session is not reserved and no usage record is started for it."""
    harness = start(inprocess)
    client = harness.client
    sid = client.new_session()
    send_raw_request(client, "bad-1", "session/prompt",
                     b'{"jsonrpc":"2.0","id":"bad-1","method":"session/prompt","params":{"sessionId":"' + sid.encode()
                     + b'","prompt":[{"type":"text","text":"hi","_meta":{"x":1e400}}]}}\n', client.prompt_params(sid, "hi"))
    client.wait_for(lambda: responses(client, "bad-1"), what="the answer to the prompt holding 1e400")
    [reply] = responses(client, "bad-1")
    assert reply["error"]["code"] == -32602 and reply["error"]["data"] == {"field": "prompt[0]._meta.x"}
    assert client.prompt(sid, "hello").result() == {"stopReason": "end_turn"}
    assert [r.stop_reason for r in harness.server.store.usage(sid)] == ["end_turn"]


def test_notification_with_non_finite_number_is_not_answered(inprocess):
    """S6: a notification is never answered, even one holding a number we cannot carry."""
    harness = start(inprocess)
    client = harness.client
    before = len(responses(client))
    client.send_raw(b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s","_meta":{"n":-1e999}}}\n')
    client.send_raw(b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s","n":' + b"1" * 5000 + b"}}\n")
    assert client.initialize()["protocolVersion"] == 1
    assert len(responses(client)) == before + 1


def test_response_with_non_finite_number_fails_the_agents_request(inprocess):
    """A client answer holding 1e400 reaches the agent's waiting request as an error, not as inf."""

    def answer_with_overflow(client, request):
        client.send_raw(b'{"jsonrpc":"2.0","id":' + json.dumps(request["id"]).encode() + b',"result":{"v":[1e400]}}\n')

    harness = start(inprocess, AsksTheClientAgent(), ClientPolicy(handlers={"_test/ask": answer_with_overflow}))
    client = harness.client
    sid = client.new_session()
    assert client.prompt(sid, "go").result() == {"stopReason": "end_turn"}
    [text] = chunk_texts(client.updates(sid))
    assert text.startswith("failed: _test/ask failed: ") and "result.v[0]" in text, text


# -- ill-typed fields the runtime reads: -32602, never -32603 ---------------------------------------
def test_lone_surrogate_in_an_id_field_is_invalid_params_naming_it(inprocess):
    """A lone surrogate in sessionId, modeId or configId is -32602."""
    harness = start(inprocess)
    client = harness.client
    sid = client.new_session()
    cases = [
        ("session/prompt", {"sessionId": "s\ud800", "prompt": [{"type": "text", "text": "hi"}]}, "sessionId"),
        ("session/set_mode", {"sessionId": sid, "modeId": "ask\udc00"}, "modeId"),
        ("session/set_config_option", {"sessionId": sid, "configId": "\udfffx", "value": "a"}, "configId"),
        ("session/load", {"sessionId": "\ud800", "cwd": "/tmp", "mcpServers": []}, "sessionId"),
        ("session/resume", {"sessionId": "\ud800", "cwd": "/tmp"}, "sessionId"),
        ("session/close", {"sessionId": "\ud800"}, "sessionId"),
        ("session/delete", {"sessionId": "\ud800"}, "sessionId"),
    ]
    for method, params, field in cases:
        error = client.request(method, params).error()
        assert error["code"] == -32602, (method, error)
        assert error["data"]["field"] == field and "surrogate" in error["message"], (method, error)
    assert client.prompt(sid, "still fine").result() == {"stopReason": "end_turn"}


def test_lone_surrogates_in_paths_titles_and_text_pass_through(inprocess):
    """Ill-typed fields: a lone surrogate is how a non-UTF-8 path byte arrives; cwd, title and text keep it."""
    harness = start(inprocess)
    client = harness.client
    sid = client.call("session/new", {"cwd": "/srv/caf\udce9", "mcpServers": []})["sessionId"]
    assert client.prompt(sid, "caf\udce9 title").result() == {"stopReason": "end_turn"}
    [info] = [u for u in client.updates(sid) if u["sessionUpdate"] == "session_info_update"]
    assert info["title"] == "caf\udce9 title"


def test_text_block_whose_text_is_not_a_string_is_invalid_params(inprocess):
    """Ill-typed fields: a text block's text must be a string (-32602); other blocks' extra fields are ignored."""
    harness = start(inprocess)
    client = harness.client
    sid = client.new_session()
    for text in (5, None, ["a"], {"t": "x"}):
        error = client.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}).error()
        assert error["code"] == -32602 and "prompt[0].text" in error["message"], error
    extra = [{"type": "text", "text": "hi"}, {"type": "image", "data": "", "mimeType": "image/png", "text": 5}]
    assert client.request("session/prompt", {"sessionId": sid, "prompt": extra}).result() == {"stopReason": "end_turn"}
    assert [r.input_bytes for r in harness.server.store.usage(sid)] == [2]


@pytest.mark.parametrize("position", [
    "[" + "1" * 400 + ',"s"]',  # float() overflows
    "[" + "1" * 5000 + ',"s"]',  # over the int digit limit
    "[" * 5000 + "]" * 5000,  # nesting
    '[1e400,"s"]',
    '[1,"s",3]',
    '{"a":1}',
    "[NaN,\"s\"]",
])
def test_forged_cursor_is_invalid_params(inprocess, position):
    """Ill-typed fields: a session/list cursor holding a huge number or deep nesting is -32602 naming cursor."""
    import base64

    harness = start(inprocess)
    cursor = base64.urlsafe_b64encode(position.encode()).decode()
    error = harness.client.request("session/list", {"cursor": cursor}).error()
    assert error["code"] == -32602 and error["data"]["field"] == "cursor", error
    assert harness.client.call("session/list", {"cursor": encode_cursor(1.5, "s")}) == {"sessions": []}


def test_config_value_of_any_depth_is_described_not_repred(inprocess):
    """Ill-typed fields: a config value of any shape is -32602 and described, never repr()ed whole."""

    harness = start(inprocess, SpeedOptionAgent())
    client = harness.client
    sid = client.new_session()
    deep = "[" * 500 + "]" * 500
    send_raw_request(client, "cfg", "session/set_config_option",
                     b'{"jsonrpc":"2.0","id":"cfg","method":"session/set_config_option","params":{"sessionId":"'
                     + sid.encode() + b'","configId":"speed","value":' + deep.encode() + b"}}\n",
                     {"sessionId": sid, "configId": "speed", "value": "fast"})
    client.wait_for(lambda: responses(client, "cfg"), what="the set_config_option answer")
    [reply] = responses(client, "cfg")
    assert reply["error"]["code"] == -32602 and reply["error"]["data"]["field"] == "value", reply
    assert "an array of 1 item" in reply["error"]["message"]


def test_ill_typed_capability_counts_as_not_advertised(inprocess):
    """Ill-typed fields: clientCapabilities.fs true (not an object) lets initialize succeed; /read then
    fails its tool call with a clear message and the turn ends normally."""
    harness = inprocess(DemoAgent())
    client = harness.client
    assert client.initialize({"fs": True, "terminal": {"odd": 1}})["protocolVersion"] == 1
    sid = client.new_session()
    assert client.prompt(sid, "/read /etc/hostname").result() == {"stopReason": "end_turn"}
    [failed] = [u for u in client.updates(sid) if u.get("status") == "failed"]
    assert "did not advertise fs.readTextFile" in failed["content"][0]["content"]["text"]


def test_deeply_nested_capabilities_are_accepted(inprocess):
    """Ill-typed fields: capabilities nested 500 levels are copied into the snapshot without recursion."""
    harness = inprocess(DemoAgent())
    client = harness.client
    send_raw_request(client, "init", "initialize",
                     b'{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":1,'
                     b'"clientCapabilities":{"_meta":' + b'{"a":' * 500 + b"1" + b"}" * 500 + b"}}}\n",
                     client.initialize_params())
    client.wait_for(lambda: responses(client, "init"), what="the initialize answer")
    [reply] = responses(client, "init")
    assert reply["result"]["protocolVersion"] == 1, reply


# -- the last-resort guard of handle_line ------------------------------------------------------------
class FakeOutbound:
    def __init__(self) -> None:
        self.lines: list[dict] = []
        self.over_hard_limit = False
        self.queued_bytes = 0

    def put(self, data: bytes) -> None:
        self.lines.append(json.loads(data))


def fake_endpoint(control) -> tuple[Endpoint, FakeOutbound]:
    outbound = FakeOutbound()
    return Endpoint(outbound, {"boom": Route(Kind.CONTROL, control)}), outbound


@pytest.mark.parametrize(("raised", "answer"), [(RuntimeError("a bug"), (None, -32700)), (MemoryError(), (1, -32603))])
def test_guard_answers_a_line_whose_decoding_failed_unexpectedly(monkeypatch, raised, answer):
    """Hostile input: anything escaping decode (a bug) is -32700 id null; running out of memory
    is -32603 `out_of_memory`, with the request's id when the line's head gives it; the next
    line is handled."""
    endpoint, outbound = fake_endpoint(lambda params, _id: {"ok": True})

    def exhausted(data):
        raise raised

    with monkeypatch.context() as patch:
        patch.setattr(wire, "decode", exhausted)
        endpoint.handle_line(b'{"jsonrpc":"2.0","id":1,"method":"boom"}')
    endpoint.handle_line(b'{"jsonrpc":"2.0","id":2,"method":"boom"}')
    assert [(m["id"], m.get("error", {}).get("code")) for m in outbound.lines] == [answer, (2, None)]


def test_guard_answers_a_request_nobody_answered_with_its_id(monkeypatch):
    """Hostile input: a failure after decoding, before any answer, answers the request once, by id."""
    endpoint, outbound = fake_endpoint(lambda params, _id: {"ok": True})
    monkeypatch.setattr(endpoint, "_run_control", lambda request, route: (_ for _ in ()).throw(RecursionError("deep")))
    endpoint.handle_line(b'{"jsonrpc":"2.0","id":"r","method":"boom"}')
    assert [(m["id"], m["error"]["code"]) for m in outbound.lines] == [("r", -32603)]
    assert "RecursionError" in outbound.lines[0]["error"]["message"]


def test_guard_never_answers_twice(monkeypatch):
    """Hostile input: a failure after the control result was queued is logged, not answered again."""
    endpoint, outbound = fake_endpoint(lambda params, _id: {"ok": True})
    original = endpoint._run_control

    def then_fail(request, route):
        original(request, route)
        raise RuntimeError("after the answer")

    monkeypatch.setattr(endpoint, "_run_control", then_fail)
    endpoint.handle_line(b'{"jsonrpc":"2.0","id":7,"method":"boom"}')
    assert outbound.lines == [{"jsonrpc": "2.0", "id": 7, "result": {"ok": True}}]


def test_guard_never_answers_a_notification(monkeypatch):
    """S6: even a notification whose handling blew up past every handler is not answered."""
    endpoint, outbound = fake_endpoint(lambda params, _id: None)
    monkeypatch.setattr(endpoint, "_handle_notification", lambda note: (_ for _ in ()).throw(RuntimeError("bug")))
    endpoint.handle_line(b'{"jsonrpc":"2.0","method":"session/cancel","params":{}}')
    assert outbound.lines == []


def test_guard_lets_greenlet_exit_through():
    """Shutdown kills the reader with GreenletExit: the guard must not swallow it."""

    def killed(params, _id):
        raise GreenletExit()

    endpoint, outbound = fake_endpoint(killed)
    with pytest.raises(GreenletExit):
        endpoint.handle_line(b'{"jsonrpc":"2.0","id":1,"method":"boom"}')
    assert [m["error"]["code"] for m in outbound.lines] == [-32800]


def test_guard_settles_a_prompt_admitted_but_never_started(inprocess, monkeypatch):
    """S14/S16: if starting the admitted greenlet fails, the guard settles the task: answered once by id,
    the session released, its usage record finished; the next prompt runs."""
    harness = start(inprocess)
    client = harness.client
    sid = client.new_session()

    class CannotStart(Greenlet):
        def start(self) -> None:
            raise RuntimeError("cannot start")

    monkeypatch.setattr(endpoint_module, "Greenlet", CannotStart)
    error = client.prompt(sid, "hello").error()
    assert error["code"] == -32603 and "cannot start" in error["message"]
    monkeypatch.undo()
    assert client.prompt(sid, "again").result() == {"stopReason": "end_turn"}
    assert [r.stop_reason for r in harness.server.store.usage(sid)] == ["error", "end_turn"]
    assert len(responses(client)) == len({json.dumps(m["id"]) for m in responses(client)})


def test_guard_leaves_a_started_greenlet_to_answer(inprocess, monkeypatch):
    """Exactly once: a failure after the prompt's greenlet started is not answered by the guard."""
    harness = start(inprocess)
    client = harness.client
    sid = client.new_session()

    class FailsAfterStart(Greenlet):
        def start(self) -> None:
            super().start()
            raise RuntimeError("after start")

    monkeypatch.setattr(endpoint_module, "Greenlet", FailsAfterStart)
    pending = client.prompt(sid, "hello")
    assert pending.result() == {"stopReason": "end_turn"}
    monkeypatch.undo()
    assert client.initialize()["protocolVersion"] == 1  # anything for the prompt came before this
    assert len(responses(client, pending.id)) == 1


# -- ids at their limits --------------------------------------------------------------------------
def test_a_huge_id_is_cut_to_an_excerpt_in_the_log(unit, caplog):
    """A response to an id the agent never used, with an id of a megabyte, is
    ignored with a log line of bounded length (a client cannot make each log line huge)."""
    conn: UnitConnection = unit(DemoAgent())
    conn.initialize()
    huge = "i" * 1_000_000
    conn.respond(huge, {})
    warned = [r.getMessage() for r in caplog.records if "not waiting for" in r.getMessage()]
    assert warned and all(len(message) < 1000 for message in warned)


# -- finishing a turn never skips its usage record (S16) ---------------------------------------------
@pytest.mark.parametrize("text", ["prompt-inf", "prompt-object", "prompt-replaced", "usage-inf"])
def test_unencodable_turn_still_answers_its_stop_reason_and_records_usage_S16(inprocess, text):
    """S16 / a defect once found: whatever cannot be encoded at the end of a turn, the client gets the agent's
    stop reason, exactly one usage record carries it, nothing is left "running", and the session goes on."""
    harness = start(inprocess, PlantsUnencodableAgent())
    client = harness.client
    sid = client.new_session()
    assert client.prompt(sid, text).result() == {"stopReason": "max_tokens"}
    records = harness.server.store.usage(sid)
    assert [r.stop_reason for r in records] == ["max_tokens"]
    assert not [r for r in harness.server.store.usage() if r.stop_reason == RUNNING]
    assert harness.server.protocol.prompts == {}
    # What could be encoded of the turn is kept: the agent's own reply is in the stored history.
    assert any(b'"ok"' in entry for entry in harness.server.store.history(sid))
    assert client.prompt(sid, "again").result() == {"stopReason": "max_tokens"}
