"""Write terminal figures to an SVG file (for a README or a slide) with Rich's terminal export.

plotext draws text with ANSI colours; Rich (already installed with Textual) turns that text into
an SVG of a terminal window, the same way the app's screenshots are made. No extra dependency, and
the picture is exactly what the terminal shows. (PNG would need a rasteriser such as cairosvg or
matplotlib; none is worth a dependency here.)
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.text import Text


def write_svg(path: Path, blocks: Sequence[str], *, width: int, title: str = "mtpwatch plot") -> None:
    """Write an SVG of these text blocks (ANSI colours kept), `width` columns wide, to `path` (raises
    OSError when it cannot)."""
    console = Console(
        record=True, width=width, file=io.StringIO(), force_terminal=True, color_system="truecolor"
    )
    for i, block in enumerate(blocks):
        if i:
            console.print()
        console.print(Text.from_ansi(block), crop=False, no_wrap=True, overflow="ignore")
    path.write_text(console.export_svg(title=title), encoding="utf-8")
