"""Text from the agent made harmless for the terminal: no escape sequence or control character it sends is acted on.

An agent's message, a tool title, a path or a command's output can carry ESC sequences that set
the window title (OSC 0), write the clipboard (OSC 52), move the cursor or recolour the screen
(CSI). Every control character but newline and tab is shown as a visible `\\xNN` instead: C0
(ESC, CR, BEL, backspace, ...), DEL and the C1 range (U+0080-U+009F, which some terminals read as
ESC sequences too). `harmless` is applied where agent text enters a line; `keep_styles` is the
last guard at the screen, letting through only the SGR styles chat itself adds (click.style).
"""

from __future__ import annotations

import re

_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_STYLE = re.compile("(\x1b\\[[0-9;]*m)")  # exactly what click.style writes: SGR, nothing else


def harmless(text: object) -> str:
    """`text` (made a string) with every control character but newline and tab written as a visible `\\xNN`."""
    return _CONTROLS.sub(lambda found: f"\\x{ord(found.group()):02x}", str(text))


def keep_styles(text: str) -> str:
    """`text` with chat's SGR styles kept and every other control character made harmless."""
    parts = _STYLE.split(text)
    return "".join(part if odd else harmless(part) for odd, part in ((i % 2 == 1, p) for i, p in enumerate(parts)))
