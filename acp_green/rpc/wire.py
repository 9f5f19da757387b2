"""JSON-RPC 2.0 framing: decode a line into a message, classify it, encode one.

Input is strict JSON (RFC 8259), decoded with the standard library's `json` and hooks that
refuse what it would otherwise accept (NaN, Infinity) or cannot hold (numbers that overflow a
double, integers over Python's digit limit); ujson encodes, the hot path. This is
the only module that imports ujson or decodes wire input, so each codec can change in one place.
No walk over decoded values here recurses: a client controls their depth.
"""

from __future__ import annotations

import json
import math
import sys
from array import array
from itertools import accumulate
from dataclasses import dataclass
from typing import Any, Union

import ujson

from ..errors import InvalidParams, InvalidRequest, ParseError

RequestId = Union[int, str, None]

_MISSING = object()


@dataclass(slots=True)
class Request:
    id: RequestId
    method: str
    params: Any


@dataclass(slots=True)
class Notification:
    method: str
    params: Any


@dataclass(slots=True)
class Response:
    id: RequestId
    result: Any = None
    error: dict[str, Any] | None = None


Message = Union[Request, Notification, Response]


class InvalidMessage(InvalidRequest):
    """A well-formed JSON value that is not a JSON-RPC message; knows the id if it had one."""

    def __init__(self, message: str, request_id: RequestId = None) -> None:
        super().__init__(message)
        self.request_id = request_id


class MalformedResponse(InvalidMessage):
    """A response-shaped message (an id, no method) that is not a valid response.

    `response_id` is the id it names (`answered_id`): one of *our* requests, whose waiter it must
    release. `request_id` stays None, so whoever answers it at all answers with id null, with
    `code` (-32600, or -32700 for a line that is not strict JSON: see `_malformed_answer`).
    """

    def __init__(self, message: str, response_id: RequestId, code: int | None = None) -> None:
        super().__init__(message)
        self.response_id = response_id
        if code is not None:
            self.code = code


def is_valid_id(value: Any) -> bool:
    """Ids are integers, strings or null; a bool is not an int here (True == 1 in Python)."""
    return id_key(value) is not None


#: What `id_key` returns for a valid id: (whether it is a string, the id).
IdKey = tuple[bool, RequestId]


def id_key(request_id: Any) -> IdKey | None:
    """The key that matches a response to its request; None when `request_id` is not a valid id.

    Two ids get equal keys exactly when they are the same JSON-RPC id: the same integer, the
    same string, or both null. 1 and "1" differ (Python's `==` keeps them apart already). 1.0
    and True are not ids here, nor are arrays or objects (`is_valid_id`): they get None, so they
    can match nothing — Python's `==` alone would match 1.0 and True with 1. The id is wrapped in
    a tuple so that null's key is not None.
    """
    if request_id is None or isinstance(request_id, str) or (isinstance(request_id, int) and not isinstance(request_id, bool)):
        return (isinstance(request_id, str), request_id)
    return None


def answered_id(value: Any) -> RequestId | _Absent:
    """The id a response-shaped message names, for releasing the waiter of one of our requests.

    JSON-RPC ids are strings, integers or null, and `id_key` matches only those exactly. A peer
    that writes our integer id as a JSON number with a fraction or an exponent (`1001.0`, `1.001e3`)
    still names request 1001: JSON itself does not tell 1001.0 from 1001, and JavaScript peers
    cannot. So an integral finite number names that integer here. This only ever releases a
    waiter with an error (the answer is malformed: `MalformedResponse`), never with a result.
    Nothing else names an id: not 1001.5, not true (Python's True == 1), not "1001" (a string id
    is another id than the integer), not NaN. ABSENT when `value` names none.
    """
    if is_valid_id(value):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return ABSENT


class _Absent:
    """The type of ABSENT: no id at all (null is an id)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"


#: What `answered_id` returns when a message names no id.
ABSENT = _Absent()


def id_text(request_id: Any) -> str:
    """A request id for a message or a log line, bounded however long the peer made it."""
    if isinstance(request_id, str):
        return repr(excerpt(request_id, 60))
    return excerpt(str(request_id), 60)


class UnrepresentableNumber(InvalidParams):
    """A request's or notification's params hold a number this runtime cannot carry.

    Valid JSON, so not a parse error: `1e400` overflows a double, and an integer longer than
    Python's digit limit cannot be converted. `source` is the message, to answer it (a request)
    or drop it (a notification).
    """

    def __init__(self, source: "Request | Notification", field: str, what: str) -> None:
        super().__init__(f"{excerpt(source.method)}: field {field!r} is {what}", data={"field": field})
        self.source = source


class _Unrepresentable:
    """Stands in, in a decoded value, for a number Python cannot hold as JSON gave it."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def describe(self) -> str:
        if "." in self.text or "e" in self.text or "E" in self.text:
            return f"a number too large for a double ({excerpt(self.text, 24)} overflows to infinity)"
        digits = len(self.text.lstrip("-"))
        return f"an integer of {digits} digits (at most {sys.get_int_max_str_digits()} are accepted)"


class _NotJson(ValueError):
    """Raised by the decoder's hooks for text RFC 8259 rejects but `json` would accept."""


# How many unrepresentable numbers the hooks have met: decode walks a value only when this
# moved while decoding it (the walk is exact, so another thread moving it costs a walk, no error).
_unrepresentable_seen = 0


def _reject_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not JSON (numbers must be finite)")


def _parse_float(text: str) -> Any:
    value = float(text)
    if math.isinf(value):  # float() of a JSON number is never NaN
        global _unrepresentable_seen
        _unrepresentable_seen += 1
        return _Unrepresentable(text)
    return value


def _parse_long_int(text: str) -> Any:
    if len(text) - text.startswith("-") > sys.get_int_max_str_digits() > 0:
        global _unrepresentable_seen
        _unrepresentable_seen += 1
        return _Unrepresentable(text)
    return int(text)


# Integers are left to the C scanner (the common case, and a Python hook per integer would
# double the cost of a small message); only a line with an over-long one is decoded again,
# by the second decoder.
_DECODER = json.JSONDecoder(parse_float=_parse_float, parse_constant=_reject_constant)
_LONG_INT_DECODER = json.JSONDecoder(parse_float=_parse_float, parse_constant=_reject_constant, parse_int=_parse_long_int)

# The json module's messages, in a client author's words.
_PARSE_WORDS = {
    "Expecting value": "expected a value",
    "Expecting property name enclosed in double quotes": "expected a member name in double quotes",
    "Expecting ':' delimiter": "expected ':' after a member name",
    "Expecting ',' delimiter": "expected ',' or a closing bracket",
    "Unterminated string starting at": "unterminated string starting",
    "Invalid control character at": "raw control character inside a string (escape it)",
    "Invalid \\escape": "invalid escape sequence in a string",
    "Invalid \\uXXXX escape": "invalid \\u escape in a string",
    "Extra data": "unexpected text after the message",
}


def decode(line: bytes | bytearray) -> Message:
    """Turn one line (without its newline) into a message, or raise ParseError/InvalidMessage.

    Raises UnrepresentableNumber for a request or notification whose params hold a number
    Python cannot carry; a response holding one becomes an error response for its waiter.
    A bytearray is consumed: emptied once its text is taken, so a long line is not held in
    memory three times (bytes, text, decoded value) while it is parsed. A batch (a JSON array)
    is refused here; `decode_with_batches` reads one.
    """
    value, seen = _decode_line(line)
    if isinstance(value, list):
        raise InvalidMessage("Batch requests are not supported")
    return _message(value, seen)


#: Members one batch may hold: a batch is handled in the receive loop member after member.
MAX_BATCH_MEMBERS = 10_000


@dataclass(slots=True)
class Batch:
    """A JSON-RPC 2.0 batch (a JSON array of messages), each member read as `decode` reads a
    line: a message, or the error that refuses it (answered in the batch's answer, in its place)."""

    members: list["Message | InvalidMessage | UnrepresentableNumber"]


def decode_with_batches(line: bytes | bytearray) -> "Message | Batch":
    """`decode`, except that a non-empty array of at most MAX_BATCH_MEMBERS values is a Batch.

    An empty array, or one over the bound, is refused as a whole (InvalidMessage, id null):
    JSON-RPC answers an empty batch with one error, not an array.
    """
    value, seen = _decode_line(line)
    if not isinstance(value, list):
        return _message(value, seen)
    if not value:
        raise InvalidMessage("Invalid request: an empty batch (JSON array) holds no message")
    if len(value) > MAX_BATCH_MEMBERS:
        raise InvalidMessage(f"A batch holds at most {MAX_BATCH_MEMBERS} messages; this one holds {len(value)}")
    return Batch([_member(item, seen) for item in value])


def _member(value: Any, seen: int) -> "Message | InvalidMessage | UnrepresentableNumber":
    try:
        if isinstance(value, list):
            raise InvalidMessage(f"A batch member must be a message object, not {describe(value)} (batches do not nest)")
        return _message(value, seen)
    except (InvalidMessage, UnrepresentableNumber) as exc:
        return exc


def _decode_line(line: bytes | bytearray) -> tuple[Any, int]:
    """The line's JSON value, and the count of unrepresentable numbers seen before it was decoded."""
    if isinstance(line, bytearray) and _too_deep(line):
        raise ParseError(f"Parse error: nesting deeper than {MAX_NESTING} levels of arrays and objects")
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        refused = ParseError(f"Parse error: invalid UTF-8 at byte {exc.start}")
        if _too_deep(line):
            raise refused from None
        raise _malformed_answer(line.decode("utf-8", "replace"), refused) from None
    checked: bytes = b""  # a bytearray's depth was checked above
    if isinstance(line, bytearray):
        line.clear()
    else:
        checked = line
    seen = _unrepresentable_seen
    try:
        return _decode_text(text, checked), seen
    except _ConstantRefused as exc:
        raise _malformed_answer(text, exc) from None


class _ConstantRefused(ParseError):
    """The text holds NaN, Infinity or -Infinity: not JSON (RFC 8259), though otherwise readable."""


def _lenient_constant(_name: str) -> Any:
    return _CONSTANT


_CONSTANT = object()  # stands for NaN/Infinity in a value read leniently, never an id
_LENIENT_DECODER = json.JSONDecoder(parse_constant=_lenient_constant, strict=False)  # raw control characters taken too


def _malformed_answer(text: str, refused: ParseError) -> ParseError | MalformedResponse:
    """A line refused as not strict JSON for NaN, Infinity or invalid UTF-8 only: a
    MalformedResponse (code -32700, the same words) when, read leniently (those constants taken,
    bad bytes replaced), it is an answer to an id of ours (`answered_id`), so that request is
    released; else the parse error itself. A NaN as the id names no request. Costs a second
    decode, only on such lines; `text`'s nesting was checked by the caller."""
    try:
        value = _LENIENT_DECODER.decode(text)
    except (ValueError, RecursionError):  # another fault beside the constant: a parse error it stays
        return refused
    if not isinstance(value, dict) or "method" in value or "id" not in value:
        return refused
    named = answered_id(value["id"])
    if isinstance(named, _Absent):
        return refused
    return MalformedResponse(refused.message, named, code=ParseError.code)


def _message(value: Any, seen: int) -> Message:
    """A decoded value as a message; `seen` tells whether it may hold an unrepresentable number."""
    if not isinstance(value, dict):
        raise InvalidMessage("A JSON-RPC message must be an object")
    message = classify(value)
    if _unrepresentable_seen != seen:
        return _without_unrepresentable(message)
    return message


def decode_value(data: bytes | str) -> Any:
    """Any strict JSON value (not a message); ParseError for anything else, including numbers
    Python cannot hold as given."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise ParseError(f"Parse error: invalid UTF-8 at byte {exc.start}") from None
    seen = _unrepresentable_seen
    value = _decode_text(text, data if isinstance(data, bytes) else None)
    if _unrepresentable_seen != seen:
        found = find_unrepresentable(value)
        if found is not None:
            raise ParseError(f"Parse error: {found[0] or 'the value'} is {found[1]}")
    return value


MAX_NESTING = 512  # levels of arrays and objects a message may use; ACP needs a few dozen

_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')
_BRACKET_STEP = bytes.maketrans(b"[]{}", b"\x01\xff\x01\xff")  # +1 / -1 as signed bytes


def _brackets_outside_strings(data: bytes | bytearray) -> bytes:
    """The brackets of a JSON text that are not inside a string, in order; all in C.

    Escaped backslashes go first (left to right, as a decoder pairs them), then escaped quotes,
    so every quote left delimits a string; only quotes and brackets are kept, and splitting at
    the quotes leaves what lies outside strings at the even positions. No regular expression:
    one match per string made a million-string prompt cost a second of the receive loop.
    For text that is not valid JSON the result may be wrong, which only changes which parse
    error is reported. UTF-8 never uses the bytes of a quote or a backslash inside a character.
    """
    kept = data.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    # Two adjacent quotes have nothing between them (an empty string, or the end of one string
    # and the start of the next once separators are gone): dropping them keeps the pairing of
    # the rest and leaves split little to do on ordinary text.
    kept = kept.replace(b'""', b"")
    if b'"' not in kept:
        return bytes(kept)
    return b"".join(kept.split(b'"')[0::2])


def _too_deep(data: bytes | bytearray) -> bool:
    """True if the JSON text nests arrays and objects deeper than MAX_NESTING.

    Cheap first: a text cannot nest deeper than its length or its count of opening brackets,
    so only a line with more than MAX_NESTING of them is measured (strings removed, then the
    running depth summed in C).
    """
    if len(data) <= MAX_NESTING or data.count(b"[") + data.count(b"{") <= MAX_NESTING:
        return False
    steps = array("b", _brackets_outside_strings(data).translate(_BRACKET_STEP))
    return max(accumulate(steps), default=0) > MAX_NESTING


def _decode_text(text: str, data: bytes | None = None) -> Any:
    # A fixed limit, checked before decoding, rather than only catching the scanner's
    # RecursionError: that would cost nothing on ordinary lines, but its limit moves with the
    # interpreter's recursion limit and the caller's stack (so ~990 levels could pass, be
    # stored and be replayed to clients whose own parsers stop near 1000). The check costs a
    # length test on lines up to MAX_NESTING bytes and two byte counts on longer ones.
    if _too_deep(data if data is not None else text.encode("utf-8", "surrogatepass")):
        raise ParseError(f"Parse error: nesting deeper than {MAX_NESTING} levels of arrays and objects")
    try:
        try:
            return _DECODER.decode(text)
        except ValueError as exc:
            if type(exc) is not ValueError:  # only int() over the digit limit raises a plain one
                raise
            return _LONG_INT_DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise ParseError(_parse_error_words(exc, text)) from None
    except _NotJson as exc:
        raise _ConstantRefused(f"Parse error: {exc}") from None
    except RecursionError:  # a caller already deep in its own stack
        raise ParseError(f"Parse error: nesting deeper than this agent can decode here") from None


def _parse_error_words(exc: json.JSONDecodeError, text: str) -> str:
    at = len(text[: exc.pos].encode("utf-8"))
    if exc.pos == 0 and text.startswith("\ufeff"):
        return "Parse error: a byte order mark (BOM) is not allowed before the message"
    if exc.msg == "Invalid control character at":
        return f"Parse error: raw control character U+{ord(text[exc.pos]):04X} inside a string at byte {at} (escape it)"
    words = _PARSE_WORDS.get(exc.msg, exc.msg)
    if exc.pos >= len(text):
        return f"Parse error: {words} at byte {at}, where the line ends"
    return f"Parse error: {words} at byte {at}"


def _without_unrepresentable(message: Message) -> Message:
    """Refuse a message whose params or result hold an unrepresentable number (rare path)."""
    if isinstance(message, Response):
        part = {"error": message.error} if message.error is not None else {"result": message.result}
        found = find_unrepresentable(part)
        if found is None:
            return message
        error = {"code": InvalidParams.code, "message": f"The client's response holds {found[1]} at {found[0]}"}
        return Response(message.id, None, error)
    found = find_unrepresentable(message.params)
    if found is None:  # in a field nobody reads: ignored, as every unknown field is
        return message
    raise UnrepresentableNumber(message, found[0], found[1])


def find_unrepresentable(value: Any) -> tuple[str, str] | None:
    """The path of the first unrepresentable number in `value` and what it is; iterative."""
    stack: list[tuple[Any, Any]] = [(value, None)]  # (node, (key, parent link) | None)
    while stack:
        node, link = stack.pop()
        if isinstance(node, _Unrepresentable):
            return render_path(link), node.describe()
        if isinstance(node, dict):
            children = [(v, (k, link)) for k, v in node.items() if isinstance(v, (dict, list, _Unrepresentable))]
        elif isinstance(node, list):
            children = [(v, (i, link)) for i, v in enumerate(node) if isinstance(v, (dict, list, _Unrepresentable))]
        else:
            continue
        children.reverse()  # the first in document order is popped first
        stack.extend(children)
    return None


_PATH_SEGMENTS = 24


def render_path(link: Any) -> str:
    """A field path such as `prompt[0]._meta.x` from a (key, parent) chain; bounded in length."""
    keys: list[Any] = []
    while link is not None:
        key, link = link
        keys.append(key)
    keys.reverse()
    if len(keys) > _PATH_SEGMENTS:
        keys = keys[: _PATH_SEGMENTS // 2] + [Ellipsis] + keys[-(_PATH_SEGMENTS // 2) :]
    parts: list[str] = []
    for key in keys:
        if key is Ellipsis:
            parts.append("…")
        elif isinstance(key, int):
            parts.append(f"[{key}]")
        elif key.isidentifier() and key.isascii() and len(key) <= 64:
            parts.append(("." if parts else "") + key)
        else:
            parts.append("[" + json.dumps(excerpt(key, 40), ensure_ascii=False) + "]")
    return "".join(parts)


def excerpt(text: str, limit: int = 80) -> str:
    """At most `limit` characters of a client-supplied string, for messages and logs."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe(value: Any) -> str:
    """What a client-supplied value is, in a few words and never its whole content: safe in an
    error message whatever its size or depth."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, _Unrepresentable):
        return value.describe()
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {json.dumps(excerpt(value, 40), ensure_ascii=False)}"
    if isinstance(value, list):
        return f"an array of {len(value)} item{'' if len(value) == 1 else 's'}"
    if isinstance(value, dict):
        return f"an object of {len(value)} member{'' if len(value) == 1 else 's'}"
    return f"a {type(value).__name__}"


def classify(value: dict[str, Any]) -> Message:
    """Sort a decoded object into request, notification or response.

    A response-shaped object (an id, no method) that is not a valid response raises
    MalformedResponse naming the id it answers (`answered_id`), so the request of ours it
    answers is released, with an error, rather than left waiting: a wrong or missing `jsonrpc`,
    an id written as 1001.0, both or neither of result and error, an error that is not an object.
    """
    request_id = value.get("id", _MISSING)
    answer_shaped = request_id is not _MISSING and "method" not in value
    if request_id is not _MISSING and not is_valid_id(request_id):
        problem = f"Invalid id: {describe(request_id)}; an id must be an integer, a string or null"
        named = answered_id(request_id) if answer_shaped else ABSENT
        if not isinstance(named, _Absent):
            raise MalformedResponse(problem, named)
        raise InvalidMessage(problem)
    # Only a request's id may be echoed: a response-shaped message carries an id of *our* requests.
    echo_id = None if request_id is _MISSING or "method" not in value else request_id
    if value.get("jsonrpc") != "2.0":
        problem = 'Missing or wrong "jsonrpc": must be "2.0"'
        if answer_shaped:
            raise MalformedResponse(problem, request_id)
        raise InvalidMessage(problem, echo_id)
    method = value.get("method", _MISSING)
    params = value.get("params")
    if method is not _MISSING:
        if not isinstance(method, str) or not method:
            raise InvalidMessage('"method" must be a non-empty string', echo_id)
        if params is not None and not isinstance(params, (dict, list)):
            raise InvalidMessage('"params" must be an object or an array', echo_id)
        if request_id is _MISSING:
            return Notification(method, params)
        return Request(request_id, method, params)
    if request_id is _MISSING:
        raise InvalidMessage("Not a request, notification or response")
    has_result = "result" in value
    error = value.get("error")
    # Its id is in the peer's space of *our* requests: echoing it would answer a request of theirs.
    if has_result and error is not None:
        raise MalformedResponse("A response carries exactly one of result and error (this one has both)", request_id)
    if not has_result and error is None:
        raise MalformedResponse("A response carries exactly one of result and error (this one has neither)", request_id)
    if error is not None and not isinstance(error, dict):
        raise MalformedResponse(f"A response's error must be an object, not {describe(error)}", request_id)
    return Response(request_id, value.get("result"), error)


def encode(message: dict[str, Any]) -> bytes:
    """One message as ASCII JSON plus a newline.

    ensure_ascii keeps lone surrogates encodable and is the faster ujson setting;
    raises TypeError/OverflowError/ValueError for values JSON cannot carry.
    """
    return ujson.dumps(message, ensure_ascii=True, escape_forward_slashes=False, allow_nan=False).encode("ascii") + b"\n"


def encode_result(request_id: RequestId, result: Any) -> bytes:
    return encode({"jsonrpc": "2.0", "id": request_id, "result": result})


def encode_error(request_id: RequestId, error: dict[str, Any]) -> bytes:
    return encode({"jsonrpc": "2.0", "id": request_id, "error": error})


def encode_request(request_id: RequestId, method: str, params: Any) -> bytes:
    """A request; params of None are left out (JSON-RPC allows only an object or an array there)."""
    if params is None:
        return encode({"jsonrpc": "2.0", "id": request_id, "method": method})
    return encode({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def encode_notification(method: str, params: Any) -> bytes:
    """A notification; params of None are left out, as for a request."""
    if params is None:
        return encode({"jsonrpc": "2.0", "method": method})
    return encode({"jsonrpc": "2.0", "method": method, "params": params})


def encode_json(value: Any) -> bytes:
    """Any JSON value as compact ASCII bytes, without a newline (stored history entries)."""
    return ujson.dumps(value, ensure_ascii=True, escape_forward_slashes=False, allow_nan=False).encode("ascii")


def json_text(text: str) -> bytes:
    """A JSON string literal, byte-identical to `encode`'s rendering of `text`.

    Printable ASCII without quote or backslash needs no escaping, and checking that in C is
    several times cheaper than a ujson call; everything else goes through ujson.
    """
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return b'"' + text.encode("ascii") + b'"'
    return ujson.dumps(text, ensure_ascii=True, escape_forward_slashes=False).encode("ascii")


def loads(data: bytes | str) -> Any:
    """Plain JSON decoding for non-wire uses (prompt arguments, stored rows)."""
    return ujson.loads(data)


def dumps(value: Any) -> str:
    """Plain JSON encoding for non-wire uses."""
    return ujson.dumps(value, ensure_ascii=False, escape_forward_slashes=False)
