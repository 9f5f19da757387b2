"""Reading what the person typed: a choice among offered options, or one form field's value.

Pure functions of the typed line, so every input has exactly one meaning: a choice is an offered
one or None (ask again); a field value is of the field's type or a reason to ask again.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .chat_text import harmless

#: The short answers of each ACP permission option kind; the first is the key shown.
KIND_WORDS: dict[str, tuple[str, ...]] = {
    "allow_once": ("y", "yes", "once"),
    "allow_always": ("a", "always"),
    "reject_once": ("n", "no", "reject"),
    "reject_always": ("never",),
}
TRUE_WORDS = frozenset({"y", "yes", "true", "1"})
FALSE_WORDS = frozenset({"n", "no", "false", "0"})


@dataclass(frozen=True, slots=True)
class Choice:
    """One answer the person may give: its label, the words that pick it, and what it stands for."""

    label: str
    words: tuple[str, ...]
    value: Any


def normalized(text: str) -> str:
    """The typed line without surrounding blanks, inner runs of blanks as one space, case-folded."""
    return " ".join(text.split()).casefold()


def pick(text: str, choices: Sequence[Choice]) -> Choice | None:
    """The choice `text` names (its number from 1, one of its words, or its label), or None when unclear."""
    typed = normalized(text)
    if not typed:
        return None
    if typed.isdecimal():
        number = int(typed)
        return choices[number - 1] if 1 <= number <= len(choices) else None
    for choice in choices:
        if typed in choice.words:
            return choice
    labelled = [choice for choice in choices if normalized(choice.label) == typed]
    return labelled[0] if len(labelled) == 1 else None


def permission_choices(options: Sequence[Any]) -> list[Choice]:
    """The offered permission options as choices; a kind's short words go to its first option only."""
    choices: list[Choice] = []
    taken: set[str] = set()
    for option in options:
        if not isinstance(option, Mapping) or not isinstance(option.get("optionId"), str):
            continue
        words = tuple(w for w in KIND_WORDS.get(str(option.get("kind")), ()) if w not in taken)
        taken.update(words)
        choices.append(Choice(str(option.get("name") or option["optionId"]), words, option))
    return choices


def describe_choices(choices: Sequence[Choice]) -> str:
    """`1 allow once [y] · 2 reject [n]`: how each choice may be typed."""
    return " · ".join(f"{n} {harmless(c.label)}" + (f" [{c.words[0]}]" if c.words else "") for n, c in enumerate(choices, 1))


@dataclass(frozen=True, slots=True)
class Invalid:
    """A typed value that does not fit its field, and why."""

    reason: str


def field_value(text: str, schema: Mapping[str, Any]) -> Any:
    """The value of one flat form field typed as `text`, or Invalid.

    Strings are taken as typed (without the line end); enums by value or number; booleans as
    y/yes/true/1 or n/no/false/0; numbers finite and within any minimum/maximum.
    """
    kind = schema.get("type")
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        choices = [Choice(str(v), (), v) for v in enum]
        found = pick(text, choices)
        return found.value if found else Invalid("one of: " + ", ".join(f"{n} {harmless(c.label)}" for n, c in enumerate(choices, 1)))
    if kind == "string":
        value = text.rstrip("\r\n")
        low, high = schema.get("minLength"), schema.get("maxLength")
        if isinstance(low, int) and len(value) < low:
            return Invalid(f"at least {low} characters")
        if isinstance(high, int) and len(value) > high:
            return Invalid(f"at most {high} characters")
        return value
    if kind == "boolean":
        typed = normalized(text)
        if typed in TRUE_WORDS:
            return True
        if typed in FALSE_WORDS:
            return False
        return Invalid("yes or no")
    if kind in ("integer", "number"):
        return _number(text.strip(), kind, schema)
    return Invalid(f"chat cannot fill a field of type {kind!r}")


def _number(typed: str, kind: str, schema: Mapping[str, Any]) -> Any:
    try:
        value: int | float = int(typed) if kind == "integer" else float(typed)
    except ValueError:
        return Invalid("a whole number" if kind == "integer" else "a number")
    if isinstance(value, float) and not math.isfinite(value):
        return Invalid("a finite number")
    low, high = schema.get("minimum"), schema.get("maximum")
    if isinstance(low, (int, float)) and value < low:
        return Invalid(f"at least {low}")
    if isinstance(high, (int, float)) and value > high:
        return Invalid(f"at most {high}")
    return value
