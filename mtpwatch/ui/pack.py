"""Labelled phrases packed into lines of a width: an 80-column panel's numbers, none cut from its label.

A `Group` is a few numbers that share one label (`accept 58 % · len 2.16 (server, 10 s, engine-wide)`).
`pack` fills lines greedily, a group at a time. A group that does not fit on what is left of a line
starts the next one; one wider than a whole line is split between two items, and each part ends
with the group's label. So a line cut at the screen's edge never loses the label of a number it
shows. Only an item longer than the whole width is cut, by the widget's ellipsis.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from rich.cells import cell_len
from textual.content import Content

SEP = " · "
"""Between two items, and between two groups on one line."""


@dataclass(frozen=True, slots=True)
class Group:
    """Numbers (markup) that share a label; the label follows the group's last item on each line."""

    items: tuple[str, ...]
    label: str = ""
    new_line: bool = False
    """Start a line (the headline groups keep their rows from one view to the next)."""


_STYLE = r"(?:b|i|dim|reverse|\$[a-z][a-z-]*)"
_TAG = re.compile(rf"\[(?:/{_STYLE}?|{_STYLE}(?: {_STYLE})*)\]")
"""The tags the panels write (`[b]`, `[dim]`, `[$text-warning]`, `[b reverse $accent]`, `[/]`)."""


def cell_width(markup: str) -> int:
    """Cells `markup` takes on screen (its tags and style variables take none).

    Parsing every line and part of a narrow panel's view (their numbers change every time) with
    `Content.from_markup` was most of its cost (`docs/measurements/`, "Lines fitted to narrower
    panes"). Markup made only of the panels' own tags around text without brackets or backslashes
    (no escaped server text) is measured by removing the tags; anything else is parsed
    (`tests/ui/test_pack.py` holds the two to the same answer).
    """
    if "\\" not in markup:
        plain = _TAG.sub("", markup)
        if "[" not in plain and "]" not in plain:
            return cell_len(plain)
    return _parsed_width(markup)


@lru_cache(maxsize=1024)
def _parsed_width(markup: str) -> int:
    return Content.from_markup(markup).cell_length


def _segment(items: Sequence[str], label: str) -> str:
    return SEP.join(items) + (f" {label}" if label else "")


def pack(groups: Sequence[Group], width: int | None) -> str:
    """The groups as lines of at most `width` cells (markup, `\\n` between lines).

    With no width (before the first layout) each `new_line` group starts a line and nothing wraps.
    """
    sep = cell_width(SEP)
    lines: list[str] = []
    line: list[str] = []  # the current line's finished segments
    used = 0  # cells of those segments and the separators between them

    def flush() -> None:
        nonlocal line, used
        if line:
            lines.append(SEP.join(line))
        line, used = [], 0

    for group in groups:
        if group.new_line:
            flush()
        label = cell_width(group.label) + 1 if group.label else 0
        whole = sum(map(cell_width, group.items)) + sep * (len(group.items) - 1) + label
        if line and width is not None and used + sep + whole > width and whole <= width:
            flush()  # a group that fits on a line of its own is not split
        part: list[str] = []
        part_cells = 0  # the part's items and the separators between them
        for item in group.items:
            size = cell_width(item)
            grown = part_cells + (sep if part else 0) + size
            if width is None or (used + (sep if line else 0) + grown + label) <= width:
                part.append(item)
                part_cells = grown
                continue
            if part:  # close the part here, with its label, and go on on a new line
                line.append(_segment(part, group.label))
                flush()
            elif line:  # nothing of this group fits after what is on the line
                flush()
            part, part_cells = [item], size
        if part:
            used += (sep if line else 0) + part_cells + label
            line.append(_segment(part, group.label))
    flush()
    return "\n".join(lines)


def fit(full: str, width: int | None, *shorter: Callable[[], Sequence[Group]]) -> str:
    """`full` where it fits one line of `width` (or no width is known), else a shorter wording: the
    first of `shorter` whose groups fit whole (each on its own row, nothing wrapped), else the last
    packed into the width (`pack`). A wide panel keeps its wording; a narrower one loses words before
    it loses rows. The markup's own length is checked first: tags only add cells.
    """
    if width is None or cell_len(full) <= width or cell_width(full) <= width:
        return full
    for wording in shorter[:-1]:
        text = pack(wording(), None)
        if all(cell_width(line) <= width for line in text.split("\n")):
            return text
    return pack(shorter[-1](), width) if shorter else full


def wrap(text: str, width: int | None) -> list[str]:
    """Plain `text` wrapped to `width` cells (one line when no width is known)."""
    if not width or width < 20:
        return [text]
    return textwrap.wrap(text, width, break_on_hyphens=False) or [""]
