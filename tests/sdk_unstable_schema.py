"""Validate what an agent wrote against the newest official SDK's unstable v1 schema (sdk-2.4.0).

Read with jsonschema from the copy the package vendors (acp_green/schema/schema.unstable.json, the
SDK's file byte for byte; acp_green/schema/README.md), so each check names the schema type it
applies. Each response is
checked against the response type of the method its request named, each notification and request
against its params type, and every message against the schema's top level.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Iterable
from typing import Any

import jsonschema

import acp_green

SDK_UNSTABLE_SCHEMA = os.path.join(os.path.dirname(acp_green.__file__), "schema", "schema.unstable.json")


@functools.lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    with open(SDK_UNSTABLE_SCHEMA, encoding="utf-8") as file:
        return json.load(file)


def _validator(ref: str) -> jsonschema.Draft202012Validator:
    schema = _schema()
    return jsonschema.Draft202012Validator({"$ref": ref, "$defs": schema["$defs"]})


def _type_for(method: str, suffix: str) -> str | None:
    for name, definition in _schema()["$defs"].items():
        if definition.get("x-method") == method and definition.get("x-side") == "agent" and name.endswith(suffix):
            return name
    return None


def problems(messages: Iterable[tuple[str, dict[str, Any]]]) -> list[str]:
    """Problems of the agent's messages among `messages`, each ("out" client->agent | "in" agent->client, message)."""
    schema = _schema()
    top = jsonschema.Draft202012Validator({"anyOf": schema["anyOf"], "$defs": schema["$defs"]})
    asked: dict[Any, str] = {}
    found: list[str] = []
    for direction, message in messages:
        if direction == "out":
            if "method" in message and "id" in message:
                asked[json.dumps(message["id"])] = message["method"]
            continue
        found.extend(f"{error.message} in {json.dumps(message)[:300]}" for error in top.iter_errors(message))
        if "method" in message:
            if message["method"] == "session/update":
                found.extend(e.message for e in _validator("#/$defs/SessionNotification").iter_errors(message.get("params")))
            continue
        method = asked.get(json.dumps(message.get("id")))
        if method is None or "result" not in message:
            continue
        name = _type_for(method, "Response")
        if name is not None:
            found.extend(f"{method}: {e.message}" for e in _validator(f"#/$defs/{name}").iter_errors(message["result"]))
    return found


def check_response(method: str, result: Any) -> None:
    """Raise unless `result` is a valid response of `method` in the SDK's unstable schema."""
    name = _type_for(method, "Response")
    assert name is not None, f"no response type for {method} in {SDK_UNSTABLE_SCHEMA}"
    _validator(f"#/$defs/{name}").validate(result)


def check_request(method: str, params: Any) -> None:
    """Raise unless `params` are valid params of the agent-side `method` in the SDK's unstable schema."""
    name = _type_for(method, "Request")
    assert name is not None, f"no request type for {method} in {SDK_UNSTABLE_SCHEMA}"
    _validator(f"#/$defs/{name}").validate(params)
