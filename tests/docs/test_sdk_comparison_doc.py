"""SDK comparison: docs/SDK-COMPARISON.md has a row for every stable ACP method an agent
handles or calls (every `x-method` of the stable schema), and names the SDK's methods that really exist."""

from __future__ import annotations

import json
import os
import re

import acp.interfaces

from tests.helpers import REPO

ROOT = str(REPO)


def _doc_rows() -> list[str]:
    text = open(os.path.join(ROOT, "docs", "SDK-COMPARISON.md"), encoding="utf-8").read()
    return [line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| `")]


def _stable_methods() -> list[str]:
    """Every wire method the stable schema types (its request, response and notification types carry `x-method`)."""
    schema = json.load(open(os.path.join(ROOT, "acp_green", "schema", "schema.json"), encoding="utf-8"))
    return sorted({spec["x-method"] for spec in schema["$defs"].values() if isinstance(spec, dict) and "x-method" in spec})


def test_every_stable_method_has_its_row():
    methods = _stable_methods()
    assert "session/prompt" in methods and "$/cancel_request" in methods and len(methods) == 25, methods
    first_cells = _doc_rows()
    assert [m for m in methods if not any(cell.startswith(f"`{m}`") for cell in first_cells)] == []


def test_the_sdk_methods_named_exist_and_the_missing_ones_are_missing():
    """The doc says 0.12.1's Agent has no logout or delete method; it names methods the SDK has."""
    agent_methods = {m for m in dir(acp.interfaces.Agent) if not m.startswith("_")}
    assert "logout" not in agent_methods and "delete_session" not in agent_methods
    text = open(os.path.join(ROOT, "docs", "SDK-COMPARISON.md"), encoding="utf-8").read()
    named = set(re.findall(r"`([a-z_]+)\(", text.split("## Runtime guarantees")[0]))
    client_methods = {m for m in dir(acp.interfaces.Client) if not m.startswith("_")}
    sdk_side = {n for n in named if n in agent_methods | client_methods}
    assert {"initialize", "prompt", "cancel", "set_config_option", "create_terminal", "request_permission"} <= sdk_side
