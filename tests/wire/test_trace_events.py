"""The trace's event for one line (acp_green/tracing.py `wire_event`): never raises, whatever the
bytes; keeps them exactly (`raw` or `raw_b64`, never both); sorts JSON-RPC messages as the strict
decoder does and says why anything else is no message."""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.tracing import encode_event, wire_event

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
MESSAGE = st.fixed_dictionaries(
    {"jsonrpc": st.sampled_from(["2.0", "2.0", "1.0"])},
    optional={"id": st.none() | st.integers() | st.text() | st.floats(allow_nan=False), "method": st.text(max_size=20),
              "params": JSON, "result": JSON, "error": JSON},
)


def kept_bytes(event: dict[str, Any]) -> bytes:
    assert ("raw" in event) != ("raw_b64" in event), event
    return event["raw"].encode("utf-8") if "raw" in event else base64.b64decode(event["raw_b64"], validate=True)


def check(data: bytes, sender: str, newline: bool) -> dict[str, Any]:
    event = wire_event(data, sender, newline=newline)
    written = json.loads(encode_event({"ts": 0.0, "seq": 0, **event}))  # one line of the file, read back
    assert kept_bytes(written) == data
    assert written["from"] == sender and written["to"] == {"client": "agent", "agent": "client"}[sender]
    assert written.get("newline", True) is newline
    assert written["type"] in ("request", "response", "notification", "line")
    if written["type"] == "line":
        assert isinstance(written["error"], str) and written["error"]
    return written


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300) | st.binary(min_size=200, max_size=5000), st.sampled_from(["client", "agent"]), st.booleans())
def test_any_bytes_become_an_event_that_keeps_them_exactly(data: bytes, sender: str, newline: bool) -> None:
    check(data, sender, newline)


@settings(max_examples=400, deadline=None)
@given(MESSAGE, st.sampled_from(["client", "agent"]), st.booleans())
def test_message_shaped_lines_are_sorted_and_kept_exactly(value: dict[str, Any], sender: str, ascii_only: bool) -> None:
    data = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")
    event = check(data, sender, True)
    if event["type"] == "request":
        assert (event["id"], event["method"], event["params"]) == (value["id"], value["method"], value.get("params"))
    elif event["type"] == "notification":
        assert "id" not in event and event["method"] == value["method"]
    elif event["type"] == "response":
        assert event["is_error"] == ("error" in value and value["error"] is not None)
        assert event["payload"] == (value["error"] if event["is_error"] else value.get("result"))


def test_each_kind_of_line():
    request = wire_event(b'{"jsonrpc":"2.0","id":"a","method":"session/prompt","params":{"sessionId":"s1"}}', "client")
    assert request == {"type": "request", "from": "client", "to": "agent", "protocol": "acp", "id": "a",
                       "method": "session/prompt", "session": "s1", "params": {"sessionId": "s1"},
                       "raw": '{"jsonrpc":"2.0","id":"a","method":"session/prompt","params":{"sessionId":"s1"}}'}
    update = wire_event(b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":7}}', "agent")
    assert (update["type"], update["session"], update["to"]) == ("notification", None, "client")
    assert wire_event(b'{"jsonrpc":"2.0","method":"initialized"}', "client")["params"] is None
    failed = wire_event(b'{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"m"}}', "agent", newline=False)
    assert (failed["type"], failed["is_error"], failed["payload"]["code"], failed["newline"]) == ("response", True, -32601, False)
    answered = wire_event(b'{"jsonrpc":"2.0","id":3,"result":null}', "client")
    assert (answered["is_error"], answered["payload"], "newline" in answered) == (False, None, False)
    for data, why in ((b"\xff{}", "invalid UTF-8 at byte 0"), (b"[]", "batch"), (b"{", "expected"),
                      (b'"text"', "is an object"), (b'{"jsonrpc":"2.0"}', "Not a request"),
                      (b'{"jsonrpc":"2.0","id":1,"result":1,"error":{}}', "exactly one"),
                      (b'{"jsonrpc":"2.0","id":1,"result":1e999}', "too large"), (b"", "expected a value")):
        event = wire_event(data, "agent")
        assert event["type"] == "line" and why in event["error"], (data, event)
    assert "raw" not in wire_event(b"\xff", "agent") and wire_event(b"\xff", "agent")["raw_b64"] == "/w=="
