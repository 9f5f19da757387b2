"""What we send, built in the negotiated version's shape: the connection's outgoing dialect.

Each update and each request the agent sends is built once, where it is made (a turn's output,
a replay, the updates that follow a session's answer, a permission request), through the
connection's `OutgoingDialect`: ACP v1's shapes are the identity, v2's are dialect_v2's shape
functions. History stays stored in v1's shape (docs/V2.md), so a v2 turn encodes a reshaped
update's JSON a second time for the wire; a kind v2 leaves as it is (a message chunk with its
messageId, usage, session info, notices...) reuses the stored JSON, so the stream's hot path
costs what it costs under v1.

A shape that cannot be built (agent code sent what the shape functions cannot read) is logged
at ERROR naming the kind and not sent (a request: refused to its caller): never v1 to a v2 client.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..errors import ClientError
from ..rpc import wire
from . import dialect_v2
from .updates import encode_update

log = logging.getLogger(__name__)


class Shapes:
    """ACP v1: what the protocol layer builds is what is sent (the identity)."""

    version = 1
    identity = True

    def update(self, update: dict[str, Any]) -> dict[str, Any] | None:
        """A v1 `session/update` update as this version sends it; None: not sent."""
        return update

    def encoded(self, update: dict[str, Any], update_json: bytes | None = None) -> bytes | None:
        """The JSON of `update` as this version sends it; `update_json`, when given, is its v1
        JSON (returned as it is wherever the shapes agree). None: not sent."""
        return update_json if update_json is not None else wire.encode_json(update)

    def stored(self, kind: str, update_json: bytes) -> bytes | None:
        """A stored (v1) update of `kind`, as this version sends it; None: not sent."""
        return update_json

    def line(self, session_id: str, update: dict[str, Any]) -> bytes | None:
        """A `session/update` line of `update` for `session_id`; None: not sent."""
        shaped = self.update(update)
        return None if shaped is None else encode_update(session_id, shaped)

    def request(self, method: str, params: Any) -> Any:
        """A request's params as this version sends them."""
        return params


class V2Shapes(Shapes):
    """ACP v2 (draft): dialect_v2's shape functions."""

    version = dialect_v2.VERSION
    identity = False

    def update(self, update: dict[str, Any]) -> dict[str, Any] | None:
        if not _reshaped(update.get("sessionUpdate"), update):
            return update
        try:
            return dialect_v2.update(update)
        except Exception:
            log.error("a %s update cannot be built in ACP v2's shape; not sent", _kind(update), exc_info=True)
            return None

    def encoded(self, update: dict[str, Any], update_json: bytes | None = None) -> bytes | None:
        if update_json is not None and not _reshaped(update.get("sessionUpdate"), update):
            return update_json
        shaped = self.update(update)
        return None if shaped is None else (update_json if shaped is update and update_json is not None else wire.encode_json(shaped))

    def stored(self, kind: str, update_json: bytes) -> bytes | None:
        if kind not in dialect_v2.RESHAPED and (kind not in dialect_v2.MESSAGE_CHUNKS or b'"messageId":' in update_json):
            return update_json
        return self.encoded(wire.loads(update_json))

    def request(self, method: str, params: Any) -> Any:
        if method != "session/request_permission" or not isinstance(params, Mapping):
            return params
        try:
            return dialect_v2.permission_request(params)
        except Exception:
            log.error("a %s request cannot be built in ACP v2's shape; refused", method, exc_info=True)
            raise ClientError(method, {"message": "the request cannot be built in ACP v2's shape"}) from None


def _reshaped(kind: Any, update: Mapping[str, Any]) -> bool:
    """Whether v2's shape of an update of `kind` differs from v1's."""
    return kind in dialect_v2.RESHAPED or (kind in dialect_v2.MESSAGE_CHUNKS and "messageId" not in update)


def _kind(update: Any) -> str:
    kind = update.get("sessionUpdate") if isinstance(update, Mapping) else None
    return wire.excerpt(kind) if isinstance(kind, str) else "malformed"


V1 = Shapes()
V2 = V2Shapes()


def shapes_for(version: int) -> Shapes:
    """The shapes of a negotiated protocol version."""
    return V2 if version >= dialect_v2.VERSION else V1


class OutgoingDialect:
    """One connection's dialect for what it sends: v1's until `initialize` negotiates another
    (`ConnectionMethods.speak`). A turn takes the shapes it was admitted under (S3)."""

    __slots__ = ("shapes",)

    def __init__(self) -> None:
        self.shapes: Shapes = V1

    def speak(self, version: int) -> None:
        self.shapes = shapes_for(version)
