"""JSON-RPC 2.0 framing: decode a line into a message, classify it, encode one.

This is the only module that imports ujson, so the codec can change in one place.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable
from typing import Any, Union

import ujson

from .errors import InvalidRequest, ParseError

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


def is_valid_id(value: Any) -> bool:
    """Ids are integers, strings or null; a bool is not an int here (True == 1 in Python)."""
    return value is None or isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def id_key(request_id: RequestId) -> tuple[bool, RequestId]:
    """A dict key that keeps 1 and "1" apart."""
    return (isinstance(request_id, str), request_id)


def decode(line: bytes) -> Message:
    """Turn one line (without its newline) into a message, or raise ParseError/InvalidMessage."""
    try:
        value = ujson.loads(line)
    except (ValueError, OverflowError) as exc:
        raise ParseError(f"Parse error: {exc}") from None
    if b"\xed" in line:  # ujson lets UTF-8-encoded surrogates (ED A0..BF xx) through
        try:
            line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(f"Parse error: invalid UTF-8: {exc.reason}") from None
    if (b"NaN" in line or b"Infinity" in line) and _has_non_finite(value):
        raise ParseError("Parse error: NaN and Infinity are not JSON")
    if isinstance(value, list):
        raise InvalidMessage("Batch requests are not supported")
    if not isinstance(value, dict):
        raise InvalidMessage("A JSON-RPC message must be an object")
    return classify(value)


def _has_non_finite(value: Any) -> bool:
    """ujson accepts the non-JSON literals NaN and Infinity; find them (rarely reached)."""
    if isinstance(value, float):
        return value != value or value in (float("inf"), float("-inf"))
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_non_finite(v) for v in value)
    return False


def classify(value: dict[str, Any]) -> Message:
    """Sort a decoded object into request, notification or response."""
    request_id = value.get("id", _MISSING)
    if request_id is not _MISSING and not is_valid_id(request_id):
        raise InvalidMessage(f"Invalid id {request_id!r}: must be an integer, a string or null")
    # Only a request's id may be echoed: a response-shaped message carries an id of *our* requests.
    echo_id = None if request_id is _MISSING or "method" not in value else request_id
    if value.get("jsonrpc") != "2.0":
        raise InvalidMessage('Missing or wrong "jsonrpc": must be "2.0"', echo_id)
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
    if has_result == (error is not None) or (error is not None and not isinstance(error, dict)):
        # Its id is in the peer's space of *our* requests: echoing it would answer a request of theirs.
        raise InvalidMessage("A response carries exactly one of result and error")
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
    return encode({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def encode_notification(method: str, params: Any) -> bytes:
    return encode({"jsonrpc": "2.0", "method": method, "params": params})


def notification_encoder(method: str, fixed: dict[str, Any], key: str) -> Callable[[Any], bytes]:
    """An encoder for notifications whose params differ only in `key`; the rest is encoded once.

    The streaming hot path: a turn's `session/update`s share method and sessionId, so only the
    update itself is encoded per chunk.
    """
    head = encode({"jsonrpc": "2.0", "method": method, "params": {**fixed, key: None}})
    marker = b'"' + key.encode("ascii") + b'":null}}\n'
    if not head.endswith(marker):  # pragma: no cover - ujson keeps insertion order
        raise RuntimeError("unexpected notification layout")
    prefix = head[: -len(marker)] + b'"' + key.encode("ascii") + b'":'
    dumps_ = ujson.dumps

    def encode_one(value: Any) -> bytes:
        return prefix + dumps_(value, ensure_ascii=True, escape_forward_slashes=False, allow_nan=False).encode("ascii") + b"}}\n"

    return encode_one


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
