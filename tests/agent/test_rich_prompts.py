"""Rich prompts: image, audio and resource blocks reach the agent as typed blocks
(`turn.blocks`, `turn.text` unchanged); text and resource_link are always accepted; the agent
declares the rest, `promptCapabilities` follows, and an undeclared kind is refused -32602 naming
`prompt[i]` at admission. End to end through `acp-green serve` (schema-checked at teardown), plus
property tests of the admission check itself."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_green.blocks import blocks_of
from acp_green.errors import InvalidParams
from acp_green.rpc.params import Params
from acp_green.protocol.prompt import prompt_blocks
from acp_green.tools.rig.client import RpcErrorResponse
from tests.helpers import said

READER = ("--agent", "tests.surface_agents:ReadsEveryBlockAgent")
PNG = base64.b64encode(b"\x89PNG").decode()


def _prompt(agent, sid: str, blocks: list[dict]):
    return agent.request("session/prompt", {"sessionId": sid, "prompt": blocks})


def test_prompt_capabilities_follow_what_the_agent_declared(launch):
    """The demo declares images only; the reader audio and embedded context; a plain agent nothing."""
    caps = launch().initialize()["agentCapabilities"]["promptCapabilities"]
    assert caps == {"image": True, "audio": False, "embeddedContext": False}
    caps = launch(*READER).initialize()["agentCapabilities"]["promptCapabilities"]
    assert caps == {"image": False, "audio": True, "embeddedContext": True}
    caps = launch("--agent", "tests.agents:NeedsAuthAgent").initialize()["agentCapabilities"]["promptCapabilities"]
    assert caps == {"image": False, "audio": False, "embeddedContext": False}


def test_the_demo_image_command_describes_the_images_it_received(launch):
    """`/image` with two image blocks (one with a URI) beside the text; `turn.text` is still "/image"."""
    agent = launch()
    agent.initialize()
    sid = agent.new_session()
    blocks = [{"type": "text", "text": "/image"}, {"type": "image", "mimeType": "image/png", "data": PNG, "uri": "file:///a.png"},
              {"type": "image", "mimeType": "image/gif", "data": "!!"}]
    assert _prompt(agent, sid, blocks).result() == {"stopReason": "end_turn"}
    assert said(agent.updates(sid)) == "image 1: image/png, 4 bytes, from file:///a.png\nimage 2: image/gif, not valid base64\n"
    assert agent.prompt(sid, "/image").result() == {"stopReason": "end_turn"}
    assert said(agent.updates(sid)).endswith("no images")


@pytest.mark.parametrize("index, block, flag", [
    (1, {"type": "audio", "mimeType": "audio/wav", "data": PNG}, "audio"),
    (2, {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "x"}}, "embeddedContext"),
])
def test_an_undeclared_kind_is_refused_naming_its_position(launch, index, block, flag):
    """The demo does not accept audio or embedded resources: -32602 naming prompt[i] and the flag;
    the session is not left busy."""
    agent = launch()
    agent.initialize()
    sid = agent.new_session()
    blocks = [{"type": "text", "text": "hi"}, {"type": "resource_link", "uri": "file:///r", "name": "r"}][:index] + [block]
    with pytest.raises(RpcErrorResponse) as refused:
        _prompt(agent, sid, blocks).result()
    assert refused.value.code == -32602
    assert f"prompt[{index}] has type '{block['type']}'" in refused.value.error["message"]
    assert f"promptCapabilities.{flag} is false" in refused.value.error["message"]
    assert agent.prompt(sid, "after").result() == {"stopReason": "end_turn"}


def test_an_image_is_refused_by_an_agent_that_did_not_declare_images(launch):
    agent = launch(*READER)
    agent.initialize()
    sid = agent.new_session()
    with pytest.raises(RpcErrorResponse) as refused:
        _prompt(agent, sid, [{"type": "image", "mimeType": "image/png", "data": PNG}]).result()
    assert "prompt[0] has type 'image'" in refused.value.error["message"]


def test_declared_kinds_reach_the_agent_as_typed_blocks(launch):
    """Text, audio, a text resource, a blob resource and a resource link, in order, with their fields."""
    agent = launch(*READER)
    agent.initialize()
    sid = agent.new_session()
    blocks = [
        {"type": "text", "text": "look"},
        {"type": "audio", "mimeType": "audio/wav", "data": base64.b64encode(b"RIFF").decode()},
        {"type": "resource", "resource": {"uri": "file:///a.py", "mimeType": "text/x-python", "text": "x = 1"}},
        {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": base64.b64encode(b"\x00\x01").decode()}},
        {"type": "resource_link", "uri": "file:///c.md", "name": "c.md"},
    ]
    assert _prompt(agent, sid, blocks).result() == {"stopReason": "end_turn"}
    assert said(agent.updates(sid)) == ("text:look|audio:audio/wav:b'RIFF'|resource:file:///a.py:text/x-python:b'x = 1'|"
                                        "resource:file:///b.bin:None:b'\\x00\\x01'|link:file:///c.md:c.md|text='lookfile:///c.md'")


@pytest.mark.parametrize("block, problem", [
    ({"type": "audio", "data": PNG}, "prompt[0].mimeType must be a string"),
    ({"type": "audio", "mimeType": "audio/wav", "data": 7}, "prompt[0].data must be a string"),
    ({"type": "resource", "resource": {"uri": "file:///a"}}, "prompt[0].resource must hold a string 'text' or a string 'blob'"),
    ({"type": "resource", "resource": "file:///a"}, "prompt[0].resource must be an object"),
])
def test_a_declared_block_missing_a_field_is_refused(launch, block, problem):
    agent = launch(*READER)
    agent.initialize()
    sid = agent.new_session()
    with pytest.raises(RpcErrorResponse) as refused:
        _prompt(agent, sid, [block]).result()
    assert refused.value.code == -32602 and problem in refused.value.error["message"]


# -- the admission check as a property ---------------------------------------------------------
#: A valid block of each kind; the strategy spoils some of its fields, so most cases sit at the boundary.
_VALID = {
    "text": {"text": "t"},
    "image": {"data": "AA==", "mimeType": "image/png", "uri": "file:///i"},
    "audio": {"data": "AA==", "mimeType": "audio/wav"},
    "resource_link": {"uri": "file:///l", "name": "l", "size": 3},
    "resource": {"resource": {"uri": "file:///r", "text": "x", "blob": "AA==", "mimeType": "text/plain"}},
    "other": {"anything": 1},
}
_DROP = object()
_spoilt = st.one_of(st.just(_DROP), st.none(), st.booleans(), st.integers(), st.lists(st.integers(), max_size=1), st.text(max_size=3))


def _spoil(kind: str, spoil: dict, spoil_inner: dict) -> dict:
    block = {"type": kind, **_VALID[kind]}
    if "resource" in block:
        block["resource"] = {k: v for k, v in {**block["resource"], **spoil_inner}.items() if v is not _DROP}
    return {k: v for k, v in {**block, **spoil}.items() if v is not _DROP}


_block = st.builds(
    _spoil,
    st.sampled_from(sorted(_VALID)),
    st.dictionaries(st.sampled_from(["type", "text", "data", "mimeType", "uri", "name", "size", "resource"]), _spoilt, max_size=2),
    st.dictionaries(st.sampled_from(["uri", "text", "blob", "mimeType"]), _spoilt, max_size=3),
)


@settings(deadline=None, max_examples=300)
@given(st.lists(_block, min_size=1, max_size=3), st.frozensets(st.sampled_from(["image", "audio", "resource"])))
def test_admission_refuses_by_position_or_every_block_is_typed(prompt, accepted):
    """Any prompt either is refused -32602 naming `prompt[i]`, or every block builds its typed value
    (no KeyError or TypeError for agent code to meet), and no undeclared kind gets through."""
    try:
        admitted = prompt_blocks(Params({"prompt": prompt}, "session/prompt"), accepted)
    except InvalidParams as exc:
        assert exc.code == -32602 and "prompt[" in exc.message
        return
    typed = blocks_of(admitted)
    assert [b.type for b in typed] == [b["type"] for b in admitted]
    assert {b.type for b in typed} & {"image", "audio", "resource"} <= accepted
