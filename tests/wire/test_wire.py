"""Unit tests of the wire layer."""

from __future__ import annotations

import json

import pytest

from acp_green.rpc import wire
from acp_green.errors import INVALID_REQUEST, PARSE_ERROR, ParseError


def line(value) -> bytes:
    """A decoded value as one JSON line (without its newline), like a client would write it."""
    return json.dumps(value).encode()


# -- classify ---------------------------------------------------------------------------------
def test_decode_classifies_a_request():
    message = wire.decode(line({"jsonrpc": "2.0", "id": 7, "method": "session/new", "params": {"cwd": "/"}}))
    assert message == wire.Request(7, "session/new", {"cwd": "/"})


def test_decode_classifies_a_request_without_params():
    assert wire.decode(line({"jsonrpc": "2.0", "id": 1, "method": "x"})) == wire.Request(1, "x", None)


def test_decode_classifies_a_notification():
    message = wire.decode(line({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}}))
    assert message == wire.Notification("session/cancel", {"sessionId": "s"})


def test_decode_classifies_a_result_response():
    message = wire.decode(line({"jsonrpc": "2.0", "id": 3, "result": {"content": "hi"}}))
    assert message == wire.Response(3, {"content": "hi"}, None)


def test_decode_classifies_a_null_result_response():
    """`"result": null` is still a result (the member is present)."""
    message = wire.decode(line({"jsonrpc": "2.0", "id": 3, "result": None}))
    assert isinstance(message, wire.Response) and message.result is None and message.error is None


def test_decode_classifies_an_error_response():
    error = {"code": -32002, "message": "Resource not found"}
    message = wire.decode(line({"jsonrpc": "2.0", "id": "r", "error": error}))
    assert message == wire.Response("r", None, error)


# -- ids, S4 ----------------------------------------------------------------------------------
ECHOED_IDS = [0, 1, -1, -(2**31), 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63) - 1, 10**30,
              "", "0", "1", "abc", "ünï", "\u2028", None]


@pytest.mark.parametrize("request_id", ECHOED_IDS, ids=repr)
def test_ids_are_echoed_exactly_S4(request_id):
    """S4: integers (0, negatives, big ints), strings and null survive decode and encode unchanged."""
    message = wire.decode(line({"jsonrpc": "2.0", "id": request_id, "method": "x"}))
    assert isinstance(message, wire.Request)
    assert message.id == request_id and type(message.id) is type(request_id)
    encoded = wire.encode_result(message.id, {})
    echoed = json.loads(encoded)["id"]
    assert echoed == request_id and type(echoed) is type(request_id)
    error_echo = json.loads(wire.encode_error(message.id, {"code": -1, "message": "m"}))["id"]
    assert error_echo == request_id and type(error_echo) is type(request_id)


@pytest.mark.parametrize("request_id", [0, -5, "x", None, 2**64])
def test_response_ids_are_kept_exactly_S4(request_id):
    message = wire.decode(line({"jsonrpc": "2.0", "id": request_id, "result": {}}))
    assert isinstance(message, wire.Response)
    assert message.id == request_id and type(message.id) is type(request_id)


@pytest.mark.parametrize("raw_id", ["true", "false", "1.5", "1.0", "-0.5", "1e3", "1e400", "{}", "[1]", "[]"])
def test_bool_float_and_structured_ids_are_invalid_requests_S4(raw_id):
    """S4, errors: a boolean or non-integer id is an invalid request (-32600): True == 1 in Python."""
    data = b'{"jsonrpc":"2.0","id":' + raw_id.encode() + b',"method":"session/new","params":{}}'
    with pytest.raises(wire.InvalidMessage) as info:
        wire.decode(data)
    assert info.value.code == INVALID_REQUEST
    assert info.value.request_id is None  # the id cannot be echoed: the answer goes to id null


@pytest.mark.parametrize("raw_id", ["true", "2.5"])
def test_bad_ids_are_invalid_in_responses_and_notifications_too_S4(raw_id):
    with pytest.raises(wire.InvalidMessage):
        wire.decode(b'{"jsonrpc":"2.0","id":' + raw_id.encode() + b',"result":{}}')


def test_is_valid_id_rejects_bool_S4():
    assert not wire.is_valid_id(True) and not wire.is_valid_id(False)
    assert not wire.is_valid_id(1.0) and not wire.is_valid_id({}) and not wire.is_valid_id([])
    assert wire.is_valid_id(0) and wire.is_valid_id(-3) and wire.is_valid_id("s") and wire.is_valid_id(None)


# -- parse errors -------------------------------------------------------------------------
@pytest.mark.parametrize("data", [
    b"not json",
    b"{",
    b'{"jsonrpc":"2.0","id":1,"method":"x"',
    b'{"jsonrpc":"2.0","id":1,"method":"x"} trailing',
    b"{'single': 'quotes'}",
    b"\x00",
    b"[" * 100000 + b"]" * 100000,  # too deep: an error, never a crash
], ids=["text", "open-brace", "truncated", "trailing-data", "single-quotes", "nul", "deep-nesting"])
def test_unparseable_lines_are_parse_errors(data):
    """Errors: an unparseable line is -32700."""
    with pytest.raises(ParseError) as info:
        wire.decode(data)
    assert info.value.code == PARSE_ERROR
    assert not isinstance(info.value, wire.InvalidMessage)


@pytest.mark.parametrize("data", [
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":"\xff"}}',
    b'{"jsonrpc":"2.0","id":1,"method":"\xfe\xff"}',
    b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"\xc3":1}}',  # truncated 2-byte sequence
    b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"s":"\xe2\x82"}}',  # truncated 3-byte sequence
    b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"s":"\xc0\xaf"}}',  # overlong encoding of "/"
    b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"s":"\xf4\x90\x80\x80"}}',  # above U+10FFFF
    b'\xff{"jsonrpc":"2.0","id":1,"method":"x"}',
], ids=["in-string", "in-method", "truncated-2", "truncated-3", "overlong", "above-max", "outside-string"])
def test_invalid_utf8_is_a_parse_error_not_replaced(data):
    """Layout: invalid UTF-8 is a parse error (-32700), never decoded with replacement characters."""
    with pytest.raises(ParseError) as info:
        wire.decode(data)
    assert info.value.code == PARSE_ERROR


def test_utf8_encoded_surrogate_is_a_parse_error():
    """Layout: UTF-8 may not encode U+D800..U+DFFF (RFC 3629); Python's own codec refuses it."""
    data = b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"s":"\xed\xa0\x80"}}'
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")
    with pytest.raises(ParseError):
        wire.decode(data)


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity"])
def test_non_json_number_literals_are_parse_errors(literal):
    """Errors: NaN/Infinity are not JSON (RFC 8259), so such a line is unparseable (-32700)."""
    with pytest.raises(ParseError):
        wire.decode(b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"v":' + literal + b"}}")


def test_escaped_lone_surrogate_is_accepted_and_reencoded_as_an_escape():
    """A \\ud800 escape is valid JSON text; it decodes, and encoding escapes it again (never raw bytes)."""
    message = wire.decode(b'{"jsonrpc":"2.0","id":"\\ud800","method":"x","params":{"t":"a\\udfffb"}}')
    assert message.id == "\ud800" and message.params == {"t": "a\udfffb"}
    encoded = wire.encode_result(message.id, message.params)
    assert b'"\\ud800"' in encoded and b'"a\\udfffb"' in encoded
    assert json.loads(encoded)["id"] == "\ud800"


# -- not a message ------------------------------------------------------------------------
@pytest.mark.parametrize("data", [b"[]", b'[{"jsonrpc":"2.0","id":1,"method":"x"}]', b"[1,2]"], ids=["empty", "one", "numbers"])
def test_batch_array_is_an_invalid_request(data):
    """Errors: batches are not supported: -32600 with id null."""
    with pytest.raises(wire.InvalidMessage) as info:
        wire.decode(data)
    assert info.value.code == INVALID_REQUEST and info.value.request_id is None


def test_decode_with_batches_reads_each_member_as_decode_reads_a_line():
    """ACP v2 batches: a non-empty array is a Batch whose members are messages, or the error that
    refuses each (its request id kept when readable); an object is a message as with `decode`."""
    batch = wire.decode_with_batches(b'[{"jsonrpc":"2.0","id":1,"method":"m"},{"jsonrpc":"2.0","method":"n"},'
                                     b'{"jsonrpc":"2.0","id":2,"result":3},7,[],{"jsonrpc":"1.0","id":"x","method":"m"},'
                                     b'{"jsonrpc":"2.0","id":4,"method":"m","params":{"v":1e400}}]')
    assert isinstance(batch, wire.Batch)
    request, note, response, number, nested, old, huge = batch.members
    assert isinstance(request, wire.Request) and request.id == 1
    assert isinstance(note, wire.Notification) and isinstance(response, wire.Response) and response.result == 3
    assert isinstance(number, wire.InvalidMessage) and number.request_id is None
    assert isinstance(nested, wire.InvalidMessage) and "do not nest" in nested.message
    assert isinstance(old, wire.InvalidMessage) and old.request_id == "x"
    assert isinstance(huge, wire.UnrepresentableNumber) and huge.source.id == 4
    single = wire.decode_with_batches(b'{"jsonrpc":"2.0","id":1,"method":"m"}')
    assert isinstance(single, wire.Request) and single.id == 1


@pytest.mark.parametrize("data", [b"[]", b" [ ] ", b"[" + b",".join([b"1"] * (wire.MAX_BATCH_MEMBERS + 1)) + b"]"],
                         ids=["empty", "spaced", "over-the-bound"])
def test_an_empty_batch_or_one_over_the_bound_is_refused_whole(data):
    with pytest.raises(wire.InvalidMessage) as info:
        wire.decode_with_batches(data)
    assert info.value.code == INVALID_REQUEST and info.value.request_id is None
    assert len(wire.decode_with_batches(b"[" + b",".join([b"1"] * wire.MAX_BATCH_MEMBERS) + b"]").members) == wire.MAX_BATCH_MEMBERS


@pytest.mark.parametrize("data", [b"42", b"-1.5", b'"a string"', b"null", b"true", b"false"])
def test_json_that_is_not_an_object_is_an_invalid_request(data):
    """Errors: a JSON value that is not an object is -32600 (not a parse error)."""
    with pytest.raises(wire.InvalidMessage) as info:
        wire.decode(data)
    assert info.value.code == INVALID_REQUEST and info.value.request_id is None


@pytest.mark.parametrize("value", [
    {},
    {"jsonrpc": "2.0"},
    {"jsonrpc": "2.0", "params": {}},
    {"jsonrpc": "2.0", "id": None},
], ids=["empty", "jsonrpc-only", "params-only", "id-null-only"])
def test_object_that_is_no_message_is_an_invalid_request(value):
    with pytest.raises(wire.InvalidMessage) as info:
        wire.decode(line(value))
    assert info.value.code == INVALID_REQUEST


@pytest.mark.parametrize("value", [
    {"id": 4, "method": "x"},
    {"jsonrpc": "1.0", "id": 4, "method": "x"},
    {"jsonrpc": 2.0, "id": 4, "method": "x"},
    {"jsonrpc": "2.0", "id": 4, "method": ""},
    {"jsonrpc": "2.0", "id": 4, "method": 5},
    {"jsonrpc": "2.0", "id": 4, "method": None},
    {"jsonrpc": "2.0", "id": 4, "method": "x", "params": 5},
    {"jsonrpc": "2.0", "id": 4, "method": "x", "params": "s"},
], ids=["no-jsonrpc", "jsonrpc-1.0", "jsonrpc-number", "empty-method", "method-int", "method-null", "params-int", "params-str"])
def test_bad_request_envelope_is_invalid_and_keeps_the_id(value):
    """Errors: -32600; the id was readable, so the error can name it."""
    with pytest.raises(wire.InvalidMessage) as info:
        wire.decode(line(value))
    assert info.value.code == INVALID_REQUEST and info.value.request_id == 4


def test_params_array_is_accepted_by_the_envelope():
    """JSON-RPC allows by-position params; the method handler decides whether it wants them."""
    assert wire.decode(line({"jsonrpc": "2.0", "id": 1, "method": "x", "params": [1, 2]})).params == [1, 2]


@pytest.mark.parametrize("value", [
    {"jsonrpc": "2.0", "id": 9, "result": {}, "error": {"code": 1, "message": "m"}},
    {"jsonrpc": "2.0", "id": 9, "result": None, "error": {"code": 1, "message": "m"}},
    {"jsonrpc": "2.0", "id": 9},
    {"jsonrpc": "2.0", "id": 9, "error": "boom"},
    {"jsonrpc": "2.0", "id": 9, "error": [1]},
], ids=["result-and-error", "null-result-and-error", "neither", "error-string", "error-array"])
def test_response_needs_exactly_one_of_result_and_error(value):
    """Errors: a response with both result and error (or neither, or a non-object error) is -32600."""
    with pytest.raises(wire.InvalidMessage) as info:
        wire.decode(line(value))
    assert info.value.code == INVALID_REQUEST


def test_error_types_carry_their_codes():
    """Layout: error types carry their code; to_wire gives the JSON-RPC error object."""
    error = wire.InvalidMessage("bad", 3)
    assert error.to_wire() == {"code": -32600, "message": "bad"}
    assert ParseError("p").to_wire() == {"code": -32700, "message": "p"}


# -- encode -----------------------------------------------------------------------------------
AWKWARD = {
    "newline": "a\nb\r\nc",
    "unicode": "ünïcödé ☃ 😀",
    "separators": "\u2028\u2029",
    "control": "\x00\x01\x1f\x7f",
    "slash": "a/b</script>",
    "quote": 'say "hi" \\ back',
    "lone": "x\ud800y\udfffz",
    "nested": [{"k": ["v\n"]}],
}


def test_encode_is_one_ascii_line_ending_in_newline():
    """Layout: one message, one line: ASCII only, no raw newline inside, a single trailing \\n."""
    data = wire.encode({"jsonrpc": "2.0", "id": 1, "result": AWKWARD})
    assert isinstance(data, bytes)
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    assert b"\r" not in data
    assert all(byte < 0x80 for byte in data)
    data.decode("ascii")
    assert json.loads(data)["result"] == AWKWARD  # nothing lost, lone surrogates included


def test_encode_escapes_lone_surrogates():
    data = wire.encode({"t": "\ud800"})
    assert data == b'{"t":"\\ud800"}\n'
    assert wire.encode({"t": "\udc00"}) == b'{"t":"\\udc00"}\n'


def test_encode_keeps_forward_slash_unescaped():
    assert wire.encode({"path": "/tmp/a/b"}) == b'{"path":"/tmp/a/b"}\n'


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
def test_encode_rejects_nan_and_infinity(value):
    """Values JSON cannot carry raise (the endpoint turns that into an internal error) instead of writing NaN."""
    with pytest.raises((ValueError, OverflowError)):
        wire.encode({"jsonrpc": "2.0", "id": 1, "result": {"x": value}})


def test_encode_rejects_unserializable_values():
    with pytest.raises((TypeError, OverflowError, ValueError)):
        wire.encode({"x": object()})


def test_encode_helpers_build_jsonrpc_envelopes():
    assert json.loads(wire.encode_result(0, {"a": 1})) == {"jsonrpc": "2.0", "id": 0, "result": {"a": 1}}
    assert json.loads(wire.encode_error(None, {"code": -32700, "message": "m"})) == {
        "jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "m"}}
    assert json.loads(wire.encode_request(5, "fs/read_text_file", {"path": "/x"})) == {
        "jsonrpc": "2.0", "id": 5, "method": "fs/read_text_file", "params": {"path": "/x"}}
    assert json.loads(wire.encode_notification("session/update", {"u": 1})) == {
        "jsonrpc": "2.0", "method": "session/update", "params": {"u": 1}}


def test_encode_then_decode_round_trips():
    message = {"jsonrpc": "2.0", "id": -7, "method": "session/prompt", "params": AWKWARD}
    assert wire.decode(wire.encode(message)[:-1]) == wire.Request(-7, "session/prompt", AWKWARD)


def test_fast_text_chunk_encoding_equals_the_general_encoder():
    """The streaming fast path (json_text, SessionUpdateEncoder.text_chunk with a messageId, and the
    line derived from the update JSON) is byte-identical to encode()."""
    import random

    from acp_green.protocol.updates import SessionUpdateEncoder

    rng = random.Random(7)
    alphabet = ["a", "/", '"', "\\", "\n", "\t", "\x00", "\x7f", "é", "\u2028", "\ud800", "😀", " ", "~", "\x1f", ":"]
    encoder = SessionUpdateEncoder('sess_"odd/id"')
    for _ in range(5000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert wire.json_text(text) == wire.encode(text)[:-1]
        for kind in ("agent_message_chunk", "agent_thought_chunk"):
            for message_id in (None, "Ab_-9xYz.12", text):
                update = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
                if message_id is not None:
                    update["messageId"] = message_id
                expected = wire.encode_notification("session/update", {"sessionId": 'sess_"odd/id"', "update": update})
                update_json = encoder.text_chunk(kind, text, message_id)
                assert update_json == wire.encode_json(update)
                assert encoder.line(update_json) == expected
                assert encoder.update(update) == expected


def test_response_shaped_invalid_message_never_echoes_its_id():
    """A response-shaped message that is invalid carries an id of the agent's own requests: an error
    reply must not echo it, or the client would match it to one of its requests."""
    for raw in (b'{"id":0,"result":{}}', b'{"jsonrpc":"1.0","id":3,"result":1}', b'{"jsonrpc":"2.0","id":4,"result":1,"error":{"code":1,"message":"x"}}'):
        with pytest.raises(wire.InvalidMessage) as caught:
            wire.decode(raw)
        assert caught.value.request_id is None
    with pytest.raises(wire.InvalidMessage) as caught:
        wire.decode(b'{"id":5,"method":"x"}')
    assert caught.value.request_id == 5
