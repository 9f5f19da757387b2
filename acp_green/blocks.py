"""Prompt content blocks as typed values: what `Turn.blocks` hands agent code instead of raw dicts.

Admission (protocol/prompt.py) has checked the fields each kind requires, so building a block
never fails; base64 payloads are decoded only when asked (`decoded()`), since most agents pass
them on to a model as they are.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Block kinds an agent must declare before a client may send them, and the
#: `promptCapabilities` flag each one needs.
DECLARED_KINDS = {"image": "image", "audio": "audio", "resource": "embeddedContext"}


def _decode(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"not valid base64: {exc}") from None


@dataclass(frozen=True, slots=True)
class TextBlock:
    """`{"type": "text"}`."""

    text: str
    type: str = field(default="text", init=False)


@dataclass(frozen=True, slots=True)
class ImageBlock:
    """`{"type": "image"}`: base64 `data` of type `mime_type`, maybe with the `uri` it came from."""

    data: str
    mime_type: str
    uri: str | None = None
    type: str = field(default="image", init=False)

    def decoded(self) -> bytes:
        """The image's bytes; ValueError if `data` is not valid base64."""
        return _decode(self.data)


@dataclass(frozen=True, slots=True)
class AudioBlock:
    """`{"type": "audio"}`: base64 `data` of type `mime_type`."""

    data: str
    mime_type: str
    type: str = field(default="audio", init=False)

    def decoded(self) -> bytes:
        """The audio's bytes; ValueError if `data` is not valid base64."""
        return _decode(self.data)


@dataclass(frozen=True, slots=True)
class ResourceLinkBlock:
    """`{"type": "resource_link"}`: a reference the agent may fetch itself."""

    uri: str
    name: str | None = None
    mime_type: str | None = None
    title: str | None = None
    description: str | None = None
    size: int | None = None
    type: str = field(default="resource_link", init=False)


@dataclass(frozen=True, slots=True)
class ResourceBlock:
    """`{"type": "resource"}`: embedded context, `text` or base64 `blob` (at least one is set)."""

    uri: str
    text: str | None = None
    blob: str | None = None
    mime_type: str | None = None
    type: str = field(default="resource", init=False)

    def decoded(self) -> bytes:
        """The resource's bytes: the text as UTF-8, or the blob decoded (ValueError if not base64)."""
        return self.text.encode("utf-8", "surrogatepass") if self.text is not None else _decode(self.blob or "")


@dataclass(frozen=True, slots=True)
class OtherBlock:
    """A block of a kind ACP v1 does not define, kept as the client sent it."""

    type: str
    fields: Mapping[str, Any]


Block = TextBlock | ImageBlock | AudioBlock | ResourceLinkBlock | ResourceBlock | OtherBlock


def _str(block: Mapping[str, Any], name: str) -> str | None:
    value = block.get(name)
    return value if isinstance(value, str) else None


def block_of(block: Mapping[str, Any]) -> Block:
    """One admitted wire block as its typed value (optional fields of the wrong type read as None)."""
    kind = block["type"]
    if kind == "text":
        return TextBlock(block["text"])
    if kind == "image":
        return ImageBlock(block["data"], block["mimeType"], _str(block, "uri"))
    if kind == "audio":
        return AudioBlock(block["data"], block["mimeType"])
    if kind == "resource_link":
        size = block.get("size")
        return ResourceLinkBlock(block["uri"], _str(block, "name"), _str(block, "mimeType"), _str(block, "title"),
                                 _str(block, "description"), size if isinstance(size, int) and not isinstance(size, bool) else None)
    if kind == "resource":
        resource = block["resource"]
        return ResourceBlock(resource["uri"], _str(resource, "text"), _str(resource, "blob"), _str(resource, "mimeType"))
    return OtherBlock(kind, dict(block))


def blocks_of(prompt: Sequence[Mapping[str, Any]]) -> tuple[Block, ...]:
    """Every block of an admitted prompt, typed, in order."""
    return tuple(block_of(b) for b in prompt)


def block_problem(block: Mapping[str, Any]) -> str | None:
    """What is wrong with the fields the runtime reads in a block whose `type` is a string, or None.

    The answer is phrased after the block's position, e.g. "prompt[2]" + ".data must be a string".
    """
    kind = block["type"]
    required = {"text": ("text",), "resource_link": ("uri",), "image": ("data", "mimeType"), "audio": ("data", "mimeType")}.get(kind, ())
    for name in required:
        if not isinstance(block.get(name), str):
            return f".{name} must be a string"
    if kind == "resource":
        resource = block.get("resource")
        if not isinstance(resource, dict):
            return ".resource must be an object"
        if not isinstance(resource.get("uri"), str):
            return ".resource.uri must be a string"
        if not (isinstance(resource.get("text"), str) or isinstance(resource.get("blob"), str)):
            return ".resource must hold a string 'text' or a string 'blob'"
    return None
