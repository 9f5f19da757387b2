"""The registry's rules for an agent's icon: the `icon.svg` beside its agent.json, which the registry requires.

Our own reading of the rules the registry's build applies: an SVG document (no XML comments,
which break the pages that embed icons), 16×16 and square (by its width and height, else its
viewBox), drawn in one colour through `currentColor` so that editors can theme it: every fill
and stroke, whether an attribute, an inline style or a `<style>` rule, is `currentColor`, `none`
or `inherit`, and `currentColor` is used at least once.
"""

from __future__ import annotations

import re
from pathlib import Path
from xml.etree import ElementTree

from .format import Problem

ICON_NAME = "icon.svg"
ICON_SIZE = 16
#: The only paints an icon may name (compared lowercased): anything else is a colour of its own.
THEMED_PAINTS = ("currentcolor", "none", "inherit")
#: A 16×16 icon is a few hundred bytes; a file beyond this is refused unread.
MAX_ICON_BYTES = 1 << 20
#: What an icon that is missing or wrong should be instead, said after each problem.
WANTED = (f"the registry requires an {ICON_NAME} beside agent.json: {ICON_SIZE}×{ICON_SIZE}, drawn in currentColor "
          "(fill and stroke only currentColor, none or inherit)")

_CSS_PAINT = re.compile(r"\b(fill|stroke)\s*:\s*([^;}\s]+)", re.IGNORECASE)
_UNIT = re.compile(r"(px|pt|em|ex|mm|cm|in|pc|%)$", re.IGNORECASE)


def icon_file_problems(path: Path) -> list[Problem]:
    """Every problem of the icon at `path` (one saying it is missing when it is); [] when the registry would take it."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_ICON_BYTES + 1)
    except FileNotFoundError:
        return [Problem(ICON_NAME, f"none in {path.parent}: {WANTED} (`acp-green new` makes one)")]
    except OSError as exc:
        return [Problem(ICON_NAME, f"cannot read {path}: {exc.strerror or exc}")]
    if len(data) > MAX_ICON_BYTES:
        return [Problem(ICON_NAME, f"{path} is larger than {MAX_ICON_BYTES:,} bytes: not a {ICON_SIZE}×{ICON_SIZE} icon")]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return [Problem(ICON_NAME, f"{path} is not UTF-8 text: not an SVG document")]
    return icon_problems(text)


def icon_problems(text: str) -> list[Problem]:
    """Every way the SVG document `text` breaks the registry's icon rules, in document order."""
    problems: list[Problem] = []
    if "<!--" in text:
        problems.append(Problem(ICON_NAME, "holds an XML comment, which the registry refuses (it breaks the pages "
                                           "that embed icons): remove it"))
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        return [*problems, Problem(ICON_NAME, f"is not well-formed XML: {exc}")]
    if _local(root.tag) != "svg":
        return [*problems, Problem(ICON_NAME, f"its root element is <{_local(root.tag)}>, not <svg>")]
    problems += _size_problems(root)
    problems += _paint_problems(root)
    return problems


def _local(tag: str) -> str:
    """A tag without its namespace (`{http://www.w3.org/2000/svg}svg` is `svg`)."""
    return tag.rpartition("}")[2]


def _size_problems(root: ElementTree.Element) -> list[Problem]:
    size = _length(root.get("width")), _length(root.get("height"))
    if None in size:
        parts = (root.get("viewBox") or "").replace(",", " ").split()
        size = (_length(parts[2]), _length(parts[3])) if len(parts) == 4 else (None, None)
    width, height = size
    if width is None or height is None:
        return [Problem(ICON_NAME, f"has neither width and height nor a viewBox: give width=\"{ICON_SIZE}\" "
                                   f"height=\"{ICON_SIZE}\"")]
    problems = []
    if width != height:
        problems.append(Problem(ICON_NAME, f"is {width:g}×{height:g}: not square"))
    if (width, height) != (ICON_SIZE, ICON_SIZE):
        problems.append(Problem(ICON_NAME, f"is {width:g}×{height:g}, not {ICON_SIZE}×{ICON_SIZE}"))
    return problems


def _length(value: str | None) -> float | None:
    """An SVG length as a number (its unit dropped), or None when there is none."""
    if value is None:
        return None
    try:
        return float(_UNIT.sub("", value.strip()))
    except ValueError:
        return None


def _paint_problems(root: ElementTree.Element) -> list[Problem]:
    problems: list[Problem] = []
    themed = False
    for element in root.iter():
        paints = [(name, element.get(name)) for name in ("fill", "stroke")]
        paints += [(name.lower(), value) for name, value in _CSS_PAINT.findall(element.get("style") or "")]
        if _local(element.tag) == "style":
            paints += [(name.lower(), value) for name, value in _CSS_PAINT.findall(element.text or "")]
        for name, value in paints:
            if value is None:
                continue
            paint = value.strip().lower()
            themed = themed or paint == "currentcolor"
            if paint not in THEMED_PAINTS:
                problems.append(Problem(ICON_NAME, f"<{_local(element.tag)}> has {name} {value.strip()!r}: a colour of "
                                                   "its own (use currentColor, none or inherit, so editors can theme it)"))
    if not themed:
        problems.append(Problem(ICON_NAME, "uses no currentColor: draw it with fill=\"currentColor\" (or stroke), so "
                                           "editors can theme it"))
    return problems
