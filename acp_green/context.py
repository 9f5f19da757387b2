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


def _advertised_object(capabilities: Mapping[str, Any], group: str, name: str) -> bool:
    """`capabilities[group][name]` is an object (`{}` advertises it; absent or null does not)."""
    found = capabilities.get(group)
    return isinstance(found, Mapping) and isinstance(found.get(name), Mapping)


#: The `session/update` kinds ACP lets an agent send only to a client that advertised
#: `clientCapabilities.session.<capability>` (stable v1, SDK 2.4.0): kind -> capability.
CAPABILITY_UPDATES: Mapping[str, str] = MappingProxyType({
    "notice": "notices", "compaction_update": "compaction", "compaction_summary_chunk": "compaction",
})


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

    @property
    def v1(self) -> bool:
        """The client speaks ACP v1 (the v2 draft removed the client's files and terminals)."""
        return self.protocol_version is None or self.protocol_version < 2

    def can_read_files(self) -> bool:
        return self.v1 and _advertised(self.client_capabilities, "fs", "readTextFile")

    def can_write_files(self) -> bool:
        return self.v1 and _advertised(self.client_capabilities, "fs", "writeTextFile")

    def has_terminal(self) -> bool:
        return self.v1 and self.client_capabilities.get("terminal") is True

    def can_show_notices(self) -> bool:
        """The client advertised `session.notices` (it may be sent `notice` updates); v2 needs no capability."""
        return not self.v1 or _advertised_object(self.client_capabilities, "session", "notices")

    def can_show_compaction(self) -> bool:
        """The client advertised `session.compaction` (`compaction_update`, `compaction_summary_chunk`)."""
        return _advertised_object(self.client_capabilities, "session", "compaction")

    def accepts_update(self, kind: Any) -> bool:
        """Whether ACP lets this client be sent a `session/update` of `kind` (see CAPABILITY_UPDATES)."""
        capability = CAPABILITY_UPDATES.get(kind) if isinstance(kind, str) else None
        if capability == "notices" and not self.v1:
            return True  # v2: "No Client capability is required"
        return capability is None or _advertised_object(self.client_capabilities, "session", capability)


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
