"""Checking a request's params, field by field: every refusal is -32602 naming the method and the field.

ACP handlers and the MCP-over-ACP routes both read their params through `Params`, so a client
gets the same words for the same mistake whatever it called: the message starts with the
method, and `data.field` names the field at fault.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import InvalidParams

TypeSpec = type | tuple[type, ...]


def _is_kind(value: Any, kind: TypeSpec) -> bool:
    """isinstance, except that a bool is no int: JSON tells `true` from `1`."""
    if isinstance(value, bool):
        kinds = kind if isinstance(kind, tuple) else (kind,)
        return bool in kinds or object in kinds
    return isinstance(value, kind)


class Params:
    """The params object of one request, read through checks that name `method` and the field."""

    __slots__ = ("method", "values")

    def __init__(self, params: Any, method: str, *, required: bool = False) -> None:
        """Absent params (`null`) read as an empty object unless `required`."""
        if params is None and not required:
            params = {}
        if not isinstance(params, dict):
            raise InvalidParams(f"{method}: params must be an object")
        self.method = method
        self.values: dict[str, Any] = params

    def refuse(self, field: str, problem: str) -> InvalidParams:
        """The error for `field`; `problem` follows the method name in the message."""
        return InvalidParams(f"{self.method}: {problem}", data={"field": field})

    def present(self, name: str) -> Any:
        """A field that must be there, of any type (`null` included)."""
        if name not in self.values:
            raise self.refuse(name, f"missing required field {name!r}")
        return self.values[name]

    def required(self, name: str, kind: TypeSpec) -> Any:
        value = self.present(name)
        if not _is_kind(value, kind):
            raise self.refuse(name, f"field {name!r} has the wrong type")
        return value

    def optional(self, name: str, kind: TypeSpec, default: Any = None) -> Any:
        """The field, or `default` when it is absent or `null`."""
        value = self.values.get(name)
        if value is None:
            return default
        if not _is_kind(value, kind):
            raise self.refuse(name, f"field {name!r} has the wrong type")
        return value

    def identifier(self, name: str) -> str:
        """An id field: a string that UTF-8 can carry.

        A lone surrogate (from a \\udXXX escape) is refused here only: ids are keys the store
        must bind, while paths, titles and prompt text keep theirs (a non-UTF-8 path byte
        arrives as one).
        """
        value = self.required(name, str)
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise self.refuse(name, f"field {name!r} holds a lone surrogate, which no id may") from None
        return value

    def absolute_path(self, name: str) -> str:
        path = self.required(name, str)
        if not os.path.isabs(path):
            raise self.refuse(name, f"field {name!r} must be an absolute path")
        return path

    def optional_absolute_path(self, name: str) -> str | None:
        path = self.optional(name, str)
        if path is not None and not os.path.isabs(path):
            raise self.refuse(name, f"field {name!r} must be an absolute path")
        return path

    def absolute_paths(self, name: str) -> list[str]:
        """An optional list of absolute paths; absent means none."""
        values = self.optional(name, list, [])
        if not all(isinstance(v, str) and os.path.isabs(v) for v in values):
            raise self.refuse(name, f"field {name!r} must list absolute paths")
        return list(values)
