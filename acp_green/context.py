"""The connection's authoritative context and the immutable snapshot a background request gets."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Mapping

PROTOCOL_VERSION = 1


def _frozen(value: Any) -> Any:
    """A read-only deep copy of decoded JSON, so a snapshot cannot be changed through it.

    Iterative: a client chooses the depth. Containers are listed parents first, then frozen
    in reverse, so every child is frozen before the container that holds it.
    """
    if not isinstance(value, (dict, list)):
        return value
    order: list[Any] = []
    stack = [value]
    while stack:
        node = stack.pop()
        order.append(node)
        stack.extend(v for v in (node.values() if isinstance(node, dict) else node) if isinstance(v, (dict, list)))
    frozen: dict[int, Any] = {}  # by id(): every node stays alive in `order` meanwhile
    for node in reversed(order):
        if isinstance(node, dict):
            frozen[id(node)] = MappingProxyType({k: frozen.get(id(v), v) if isinstance(v, (dict, list)) else v for k, v in node.items()})
        else:
            frozen[id(node)] = tuple(frozen[id(v)] if isinstance(v, (dict, list)) else v for v in node)
    return frozen[id(value)]


def _advertised(capabilities: Mapping[str, Any], group: str, name: str) -> bool:
    """`capabilities[group][name] is True`; a group of the wrong type advertises nothing."""
    found = capabilities.get(group)
    return isinstance(found, Mapping) and found.get(name) is True


@dataclass(frozen=True, slots=True)
class ConnectionSnapshot:
    """What a background request sees of the connection, as it was at its admission (S3)."""

    protocol_version: int | None = None
    client_capabilities: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    client_info: Mapping[str, Any] | None = None
    authenticated: bool = False
    auth_method: str | None = None

    @property
    def initialized(self) -> bool:
        return self.protocol_version is not None

    def can_read_files(self) -> bool:
        return _advertised(self.client_capabilities, "fs", "readTextFile")

    def can_write_files(self) -> bool:
        return _advertised(self.client_capabilities, "fs", "writeTextFile")

    def has_terminal(self) -> bool:
        return self.client_capabilities.get("terminal") is True


class ConnectionContext:
    """Owned by the receive loop; control handlers update it in receive order (S2)."""

    def __init__(self) -> None:
        self._snapshot = ConnectionSnapshot()

    @property
    def snapshot(self) -> ConnectionSnapshot:
        """The current state as an immutable value; cheap, shared until the next change."""
        return self._snapshot

    def initialized(self, protocol_version: int, capabilities: dict[str, Any] | None, client_info: dict[str, Any] | None) -> None:
        self._snapshot = replace(
            self._snapshot,
            protocol_version=protocol_version,
            client_capabilities=_frozen(capabilities or {}),
            client_info=_frozen(client_info) if client_info is not None else None,
        )

    def authenticated(self, method_id: str | None) -> None:
        self._snapshot = replace(self._snapshot, authenticated=method_id is not None, auth_method=method_id)
