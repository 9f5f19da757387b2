"""A collaborator's surface offered as its holder's own, one typed line per name.

The rig's fronts (`AgentProcess`, `CheckedAgent`, `InvariantChecker`) hold their collaborators
instead of deriving from them, and the tests and tools that call `agent.request(...)` or read
`checker.violations` keep doing so: each such name is a `ForwardedMethod` or a
`ForwardedAttribute` declared in the holder's class body, typed as the collaborator's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

__all__ = ["ForwardedAttribute", "ForwardedMethod"]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class ForwardedMethod(Generic[P, R]):
    """`holder.<name>(...)` calls `holder.<via>.<name>(...)`: `request = ForwardedMethod("client", AcpClient.request)`."""

    def __init__(self, via: str, method: Callable[Concatenate[Any, P], R]) -> None:
        self.via = via
        self.name = method.__name__

    @overload
    def __get__(self, holder: None, owner: type) -> ForwardedMethod[P, R]: ...

    @overload
    def __get__(self, holder: object, owner: type) -> Callable[P, R]: ...

    def __get__(self, holder: object | None, owner: type) -> ForwardedMethod[P, R] | Callable[P, R]:
        if holder is None:
            return self
        method: Callable[P, R] = getattr(getattr(holder, self.via), self.name)
        return method


class ForwardedAttribute(Generic[T]):
    """`holder.<name>` reads and writes `holder.<via>.<name>`, typed where it is declared:
    `records: ForwardedAttribute[list[Record]] = ForwardedAttribute("client")`.

    Setting it sets the collaborator's, which stays the one owner of the value:
    `checker.session_updates_between_turns = True` reaches the prompt checks that read it."""

    def __init__(self, via: str) -> None:
        self.via = via
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, holder: None, owner: type) -> ForwardedAttribute[T]: ...

    @overload
    def __get__(self, holder: object, owner: type) -> T: ...

    def __get__(self, holder: object | None, owner: type) -> ForwardedAttribute[T] | T:
        if holder is None:
            return self
        value: T = getattr(getattr(holder, self.via), self.name)
        return value

    def __set__(self, holder: object, value: T) -> None:
        setattr(getattr(holder, self.via), self.name, value)
