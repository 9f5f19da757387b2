"""Text for a terminal, from whoever wrote it: nothing in it is acted on, and nothing is lost.

What the command line prints of text it did not write (a stored session's title, cwd and
messages, an agent's answers quoted by the probe) may carry what a terminal acts on instead of
showing: ESC sequences that set the window title (OSC 0), write the clipboard (OSC 52), move the
cursor or recolour the screen (CSI); a carriage return or backspaces that overwrite what was
printed; C1 controls, which some terminals read as ESC sequences. `shown` writes each such
character visibly, as an escape a reader can decode: C0 (newline too, unless kept), DEL and C1
as `\\xNN`; the line and paragraph separators, the bidirectional overrides and isolates (which
reorder what a line shows) and lone surrogates (undecodable bytes of a path) as `\\uNNNN`. A
backslash is left as it is: the text stays readable, not reversible (`--json` is exact).
"""

from __future__ import annotations

import re

__all__ = ["shown"]

_ALL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_ALL_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: object, *, newlines: bool = False) -> str:
    """`text` (made a string) with every character a terminal would act on written as a visible
    escape; with `newlines`, a newline stays a newline (text of several lines)."""
    return (_ALL_BUT_NEWLINE if newlines else _ALL).sub(_escape, str(text))
