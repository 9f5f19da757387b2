"""Validate ACP JSON-RPC messages against the vendored ACP v1 JSON Schemas (acp_green/schema/README.md).

Three documents: the stable and unstable v1 schemas of the newest official SDK, and the older
unstable copy whose MCP-over-ACP (`mcp/connect`, `mcp/message` with `connectionId`,
`mcp/disconnect`) the newer one redesigned. A message in that older shape is checked against the
older copy alone, so clients on the older schema keep validating.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from importlib.resources import files
from typing import Any

from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from ...rpc.wire import IdKey, id_key, is_valid_id

__all__ = [
    "AcpSchema",
    "SchemaViolation",
    "StreamChecker",
    "default_schema",
    "message_kind",
]

_STABLE = "stable"
_UNSTABLE = "unstable"
_OLDER = "older-unstable"
_FILES = {_STABLE: ("schema.json",), _UNSTABLE: ("schema.unstable.json",), _OLDER: ("v1-older", "schema.unstable.json")}
# The older MCP-over-ACP names its connection; the newer `mcp/message` names a server and a request.
_OLDER_MCP_MESSAGE_KEY = "connectionId"
_KINDS = ("Request", "Notification", "Response")
_ENVELOPE_KEYS = {
    "request": frozenset({"jsonrpc", "id", "method", "params"}),
    "notification": frozenset({"jsonrpc", "method", "params"}),
    "response": frozenset({"jsonrpc", "id", "result", "error"}),
}
# Which x-side values each sender may originate (x-side names the side that handles the method).
_SENDABLE = {
    "agent": frozenset({"client", "protocol", "both"}),
    "client": frozenset({"agent", "protocol", "both"}),
}
_MISSING = object()


class SchemaViolation(Exception):
    """A message that breaks the ACP schema; carries the message and its problems."""

    def __init__(self, message_obj: Any, problems: list[str]) -> None:
        """Keep the offending message and the list of its problems."""
        super().__init__("; ".join(problems))
        self.message_obj = message_obj
        self.problems = list(problems)


def message_kind(message: Any) -> str | None:
    """Classify a JSON-RPC message as "request", "notification", "response", or None."""
    if not isinstance(message, dict):
        return None
    if "method" in message:
        return "request" if "id" in message else "notification"
    if "result" in message or "error" in message or "id" in message:
        return "response"
    return None


def _short(value: Any, limit: int = 60) -> str:
    """A compact JSON rendering of a value for problem texts."""
    try:
        text = json.dumps(value, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _location(base: str, path: Iterable[Any]) -> str:
    """Render a JSON path inside a message, e.g. params.update.content[0]."""
    out = base
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _branch_const(branch: Any, prop: str) -> Any:
    """The const a oneOf branch requires for a discriminator property, or _MISSING."""
    if isinstance(branch, dict):
        spec = branch.get("properties", {}).get(prop)
        if isinstance(spec, dict) and "const" in spec:
            return spec["const"]
    return _MISSING


_STANDARD_ONE_OF = Draft202012Validator.VALIDATORS["oneOf"]
_STANDARD_REF = Draft202012Validator.VALIDATORS["$ref"]


def _discriminated_one_of(validator: Any, one_of: Any, instance: Any, schema: Any) -> Iterable[ValidationError]:
    """oneOf that, when a discriminator picks a branch, validates only that branch (falls back on failure)."""
    prop = schema.get("discriminator", {}).get("propertyName") if isinstance(schema, dict) else None
    if isinstance(prop, str) and isinstance(instance, dict) and isinstance(instance.get(prop), str):
        value = instance[prop]
        for index, branch in enumerate(one_of):
            if _branch_const(branch, prop) == value:
                if next(iter(validator.descend(instance, branch, schema_path=index)), None) is None:
                    return
                break
    # No branch chosen, or the chosen one failed: the standard oneOf gives the full error context.
    yield from _STANDARD_ONE_OF(validator, one_of, instance, schema)


def _fold_ref_wrappers(node: Any) -> Any:
    """Rewrite `{"allOf": [{"$ref": R}], ...annotations}` as `{"$ref": R, ...}` (same meaning in 2020-12, one step fewer)."""
    if isinstance(node, list):
        return [_fold_ref_wrappers(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _fold_ref_wrappers(value) for key, value in node.items()}
    wrapped = out.get("allOf")
    if (
        isinstance(wrapped, list)
        and len(wrapped) == 1
        and isinstance(wrapped[0], dict)
        and set(wrapped[0]) == {"$ref"}
        and "$ref" not in out
    ):
        del out["allOf"]
        out["$ref"] = wrapped[0]["$ref"]
    return out


def _validator_class(registry: Registry, uri: str) -> Any:
    """A Draft 2020-12 validator class for one schema document, with two exact speed-ups."""
    # 1. `$ref`s into the document ("#/$defs/...") are resolved through the `referencing` registry
    #    once and memoised, instead of on every visit.
    # 2. oneOf with a `discriminator`: every discriminated oneOf in the ACP schemas gives each
    #    branch a distinct `const`, so only the branch the discriminator names can match.
    resolver = registry.resolver(base_uri=uri)
    resolved_refs: dict[str, Any] = {}

    def cached_ref(validator: Any, ref: Any, instance: Any, schema: Any) -> Iterable[ValidationError]:
        """$ref with a per-document cache of resolved references into this document."""
        if not isinstance(ref, str) or not ref.startswith(("#", uri + "#")):
            yield from _STANDARD_REF(validator, ref, instance, schema)
            return
        resolved = resolved_refs.get(ref)
        if resolved is None:
            resolved = resolved_refs[ref] = resolver.lookup(ref)
        yield from validator.descend(instance, resolved.contents, resolver=resolved.resolver)

    return validators.extend(Draft202012Validator, {"$ref": cached_ref, "oneOf": _discriminated_one_of})


def _describe(err: ValidationError, base: str) -> list[str]:
    """Turn one jsonschema error into readable problem texts that name the offending part."""
    loc = _location(base, err.absolute_path)
    if err.validator in ("oneOf", "anyOf") and err.context and isinstance(err.validator_value, list):
        branches: list[Any] = err.validator_value
        schema = err.schema if isinstance(err.schema, dict) else {}
        prop = (schema.get("discriminator") or {}).get("propertyName")
        instance = err.instance
        if prop and isinstance(instance, dict):
            consts = [_branch_const(b, prop) for b in branches]
            allowed = [c for c in consts if c is not _MISSING]
            if prop not in instance:
                return [f"at {loc}: '{prop}' is missing (one of {_short(allowed, 400)})"]
            value = instance[prop]
            matches = [i for i, c in enumerate(consts) if c is not _MISSING and c == value and type(c) is type(value)]
            if not matches:
                return [f"at {loc}.{prop}: {_short(value)} is not one of {_short(allowed, 400)}"]
            chosen = [e for e in err.context if e.relative_schema_path and e.relative_schema_path[0] == matches[0]]
            if chosen:
                return [text for sub in chosen for text in _describe(sub, base)]
        consts = [b["const"] for b in branches if isinstance(b, dict) and "const" in b]
        enums = [v for b in branches if isinstance(b, dict) for v in b.get("enum", [])]
        if branches and len(consts) + sum(1 for b in branches if isinstance(b, dict) and "enum" in b) == len(branches):
            return [f"at {loc}: {_short(instance)} is not one of {_short(consts + enums, 400)}"]
        live = [
            i
            for i, b in enumerate(branches)
            if not (isinstance(b, dict) and b.get("type") == "null" and instance is not None)
        ]
        if len(live) == 1:
            chosen = [e for e in err.context if e.relative_schema_path and e.relative_schema_path[0] == live[0]]
            if chosen:
                return [text for sub in chosen for text in _describe(sub, base)]
        pool = [e for e in err.context if e.relative_schema_path and e.relative_schema_path[0] in live]
        best = best_match(pool or err.context)
        if best is not None:
            return [f"{text} (no alternative of {err.validator} matched)" for text in _describe(best, base)]
    return [f"at {loc}: {err.message}"]


class AcpSchema:
    """The ACP JSON Schemas, loaded once."""

    def __init__(self, folder: str = "schema") -> None:
        """Load both schemas of `folder` (in the package), index their methods and prepare a validator cache."""
        self._roots: dict[str, dict[str, Any]] = {}
        self._registries: dict[str, Registry] = {}
        self._classes: dict[str, Any] = {}
        # (schema name, method) -> {"Request"/"Notification"/"Response": $defs type name} / x-side
        self._types: dict[tuple[str, str], dict[str, str]] = {}
        self._sides: dict[tuple[str, str], str] = {}
        self._validators: dict[tuple[str, str], Any] = {}
        base = files("acp_green").joinpath(*folder.split("/"))
        for name, filename in _FILES.items():
            path = base.joinpath(*filename)
            if name == _OLDER and not path.is_file():  # a folder without an older copy (the v2 draft)
                continue
            root = json.loads(path.read_text(encoding="utf-8"))
            self._roots[name] = root
            resource = DRAFT202012.create_resource(_fold_ref_wrappers(root))
            self._registries[name] = Registry().with_resource(self._uri(name), resource)
            self._classes[name] = _validator_class(self._registries[name], self._uri(name))
            for type_name, spec in root.get("$defs", {}).items():
                method = spec.get("x-method") if isinstance(spec, dict) else None
                if not isinstance(method, str):
                    continue
                kind = next((k for k in _KINDS if type_name.endswith(k)), None)
                if kind is None:
                    continue
                self._types.setdefault((name, method), {})[kind] = type_name
                side = spec.get("x-side")
                if isinstance(side, str):
                    self._sides.setdefault((name, method), side)

    @staticmethod
    def _uri(name: str) -> str:
        """The registry URI under which one schema document lives."""
        return f"urn:acp-green:schema:{name}"

    def _older_shape(self, method: str, params: Any) -> bool:
        """True for the older MCP-over-ACP shape: a method only the older unstable copy knows
        (`mcp/connect`, `mcp/disconnect`, ...), or an `mcp/message` whose params name a `connectionId`."""
        if _OLDER not in self._roots:
            return False
        if method == "mcp/message":
            return isinstance(params, dict) and _OLDER_MCP_MESSAGE_KEY in params
        return (_OLDER, method) in self._types and not any((name, method) in self._types for name in (_STABLE, _UNSTABLE))

    def schemas_for(self, method: str, params: Any = None) -> tuple[str, ...]:
        """Every schema a method's messages must pass: stable methods pass stable AND unstable.

        The unstable schema is a superset that types fields the stable one leaves open
        (`PromptResponse.usage`, `mcpCapabilities.acp`), so only both passes check them. A
        message in the older MCP-over-ACP shape (`params`: the request's, for a response) passes
        the older unstable copy alone.
        """
        if self._older_shape(method, params):
            return (_OLDER,)
        return tuple(name for name in (_STABLE, _UNSTABLE) if (name, method) in self._types)

    def _schema_for(self, method: str, params: Any = None) -> str | None:
        """The schema that names a method's types and side: the first of `schemas_for`."""
        names = self.schemas_for(method, params)
        return names[0] if names else None

    def side(self, method: str, params: Any = None) -> str | None:
        """The method's x-side (the side that handles it), or None for unknown methods."""
        name = self._schema_for(method, params)
        return None if name is None else self._sides.get((name, method))

    def type_name(self, method: str, kind: str, params: Any = None) -> str | None:
        """The $defs type for a method's "Request", "Notification" or "Response", or None."""
        name = self._schema_for(method, params)
        return None if name is None else self._types[(name, method)].get(kind)

    def validator(self, schema_name: str, type_name: str) -> Any:
        """A cached validator for one $defs type of one schema ("stable" or "unstable")."""
        key = (schema_name, type_name)
        found = self._validators.get(key)
        if found is None:
            if type_name not in self._roots[schema_name].get("$defs", {}):
                raise KeyError(f"{type_name} is not in the {schema_name} schema")
            ref = {"$ref": f"{self._uri(schema_name)}#/$defs/{type_name}"}
            found = self._classes[schema_name](ref, registry=self._registries[schema_name])
            self._validators[key] = found
        return found

    def _check_payload(self, method: str, kind: str, payload: Any, where: str, shape: Any = None) -> list[str]:
        """Validate params or result against the method's type of the given kind, in every schema it must pass
        (`shape`: the params that pick the schemas: the message's own, or the answered request's).

        Each problem names the schema that failed: "(PromptResponse, unstable schema)"; a problem
        both schemas report alike is said once, as "(..., stable and unstable schemas)".
        """
        failed = [(name, found) for name in self.schemas_for(method, shape) if (found := self._payload_problems(name, method, kind, payload, where))]
        if len(failed) == 2 and failed[0][1] == failed[1][1]:
            failed = [("stable and unstable schemas", failed[0][1])]
        else:
            failed = [(f"{name} schema", found) for name, found in failed]
        return [f"{method} {where} ({type_name}, {which}): {text}" for which, found in failed for type_name, text in found]

    def _payload_problems(self, name: str, method: str, kind: str, payload: Any, where: str) -> list[tuple[str, str]]:
        """(type name, problem) pairs of params or result under one schema."""
        type_name = self._types[(name, method)].get(kind)
        if type_name is None:
            present = sorted(k.lower() for k in self._types[(name, method)])
            return [(kind, f"{method} has no {kind.lower()} type (it is a {' / '.join(present)} method)")]
        validator = self.validator(name, type_name)
        if payload is _MISSING or (payload is None and kind != "Response"):
            if validator.is_valid({}):
                return []
            state = "missing" if payload is _MISSING else "null"
            return [(type_name, f"{where} is {state} but {type_name} requires an object")]
        return [(type_name, text) for err in validator.iter_errors(payload) for text in _describe(err, where)]

    def problems(self, message: dict, *, request_method: str | None = None, request_params: Any = None) -> list[str]:
        """Every schema problem of one message; `request_method` names the method a response answers
        (and `request_params` its request's params, which tell the older MCP-over-ACP shape)."""
        if not isinstance(message, dict):
            return [f"message is not a JSON object: {_short(message)}"]
        problems: list[str] = []
        if message.get("jsonrpc") != "2.0":
            problems.append(f"jsonrpc must be \"2.0\", got {_short(message.get('jsonrpc', None))}")
        kind = message_kind(message)
        if kind is None:
            problems.append("message is neither a request, a notification nor a response (no method, id, result or error)")
            return problems
        extra = sorted(set(message) - _ENVELOPE_KEYS[kind])
        if extra:
            problems.append(f"{kind} has unexpected member(s) {', '.join(extra)}")
        if "id" in message and not is_valid_id(message["id"]):
            problems.append(f"id must be an integer, a string or null, got {_short(message['id'])}")
        if kind == "response":
            problems.extend(self._response_problems(message, request_method, request_params))
            return problems
        method = message["method"]
        if not isinstance(method, str):
            problems.append(f"method must be a string, got {_short(method)}")
            return problems
        if "params" in message and message["params"] is not None and not isinstance(message["params"], (dict, list)):
            problems.append(f"params must be an object or array, got {_short(message['params'])}")
            return problems
        params = message.get("params", _MISSING)
        if self._schema_for(method, params) is None:
            if not method.startswith("_"):
                problems.append(f"unknown method {method!r} (in none of the stable, unstable and older unstable schemas)")
            return problems
        problems.extend(self._check_payload(method, kind.capitalize(), params, "params", params))
        return problems

    def _response_problems(self, message: dict, request_method: str | None, request_params: Any) -> list[str]:
        """Envelope, error-object and result problems of one response."""
        problems: list[str] = []
        if "id" not in message:
            problems.append("response has no id")
        has_result, has_error = "result" in message, "error" in message
        if has_result and has_error:
            problems.append("response has both result and error (exactly one is allowed)")
        elif not has_result and not has_error:
            problems.append("response has neither result nor error (exactly one is required)")
        if has_error:
            problems.extend(self._error_problems(message["error"]))
        if has_result and not has_error and isinstance(request_method, str):
            problems.extend(self._check_payload(request_method, "Response", message["result"], "result", request_params))
        return problems

    @staticmethod
    def _error_problems(error: Any) -> list[str]:
        """Problems of a JSON-RPC error object: integer code, string message, optional data."""
        if not isinstance(error, dict):
            return [f"error must be an object, got {_short(error)}"]
        problems: list[str] = []
        code = error.get("code", _MISSING)
        if code is _MISSING:
            problems.append("error.code is missing")
        elif not isinstance(code, int) or isinstance(code, bool):
            problems.append(f"error.code must be an integer, got {_short(code)}")
        text = error.get("message", _MISSING)
        if text is _MISSING:
            problems.append("error.message is missing")
        elif not isinstance(text, str):
            problems.append(f"error.message must be a string, got {_short(text)}")
        extra = sorted(set(error) - {"code", "message", "data"})
        if extra:
            problems.append(f"error has unexpected member(s) {', '.join(extra)}")
        return problems

    def check(self, message: dict, *, request_method: str | None = None, request_params: Any = None) -> None:
        """Raise SchemaViolation if the message has any schema problem."""
        found = self.problems(message, request_method=request_method, request_params=request_params)
        if found:
            raise SchemaViolation(message, found)


@functools.lru_cache(maxsize=1)
def default_schema() -> AcpSchema:
    """The shared AcpSchema instance (loaded on first use)."""
    return AcpSchema()


class StreamChecker:
    """Validates one side's messages in a conversation, tracking request ids of both sides to know what a response answers."""

    def __init__(self, sender: str, schema: AcpSchema | None = None) -> None:
        """Check messages sent by `sender` ("agent" or "client")."""
        if sender not in _SENDABLE:
            raise ValueError(f"sender must be 'agent' or 'client', not {sender!r}")
        self.sender = sender
        self.peer = "client" if sender == "agent" else "agent"
        self.schema = schema if schema is not None else default_schema()
        self._peer_pending: dict[IdKey, str] = {}
        self._peer_params: dict[IdKey, Any] = {}  # a pending peer request's params: they tell its shape
        self._peer_answered: set[IdKey] = set()
        self._own_pending: dict[IdKey, str] = {}

    @property
    def pending_peer_requests(self) -> dict[IdKey, str]:
        """Peer requests the sender has not answered yet: (id type, id) -> method."""
        return dict(self._peer_pending)

    def observe(self, message: dict, *, from_sender: bool) -> list[str]:
        """Record a message (sent by `sender` if from_sender else by the peer); return problems for the sender's messages, [] for the peer's."""
        if not from_sender:
            self._record_peer(message)
            return []
        kind = message_kind(message)
        if kind == "response":
            return self._sender_response(message)
        problems = self.schema.problems(message)
        if kind is None:
            return problems
        method = message.get("method")
        if isinstance(method, str):
            side = self.schema.side(method, message.get("params"))
            if side is not None and side not in _SENDABLE[self.sender]:
                problems.append(f"wrong direction: {method} is handled by the {side}, but the {self.sender} sent it")
        if kind == "request":
            key = id_key(message.get("id"))
            if key is not None:
                if key in self._own_pending:
                    problems.append(f"request id {_short(message['id'])} reused while an earlier request with it is pending")
                if isinstance(method, str):
                    self._own_pending[key] = method
        return problems

    def _sender_response(self, message: dict) -> list[str]:
        """Check a response from the sender against the peer request it answers."""
        rid = message.get("id", _MISSING)
        key = id_key(rid) if rid is not _MISSING else None
        method: str | None = None
        params: Any = None
        problems: list[str] = []
        if key is not None:
            if key in self._peer_pending:
                method = self._peer_pending.pop(key)
                params = self._peer_params.pop(key, None)
                self._peer_answered.add(key)
            elif rid is None and "error" in message:
                pass  # JSON-RPC: an error whose request id could not be read is answered with id null
            elif key in self._peer_answered:
                problems.append(f"response to unknown id {_short(rid)} (that request was already answered)")
            else:
                problems.append(f"response to unknown id {_short(rid)} (the {self.peer} sent no such request)")
        return self.schema.problems(message, request_method=method, request_params=params) + problems

    def _record_peer(self, message: Any) -> None:
        """Track the peer's requests (to be answered) and responses (to the sender's requests)."""
        kind = message_kind(message)
        if kind == "request":
            key = id_key(message.get("id"))
            method = message.get("method")
            if key is not None and isinstance(method, str):
                self._peer_pending[key] = method
                self._peer_params[key] = message.get("params")
                self._peer_answered.discard(key)
        elif kind == "response":
            key = id_key(message.get("id"))
            if key is not None:
                self._own_pending.pop(key, None)
