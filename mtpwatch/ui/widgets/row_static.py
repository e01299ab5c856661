"""RowStatic: a Static whose update repaints, and renders, only the rows whose text changed.

A `Static.update` repaints the whole widget, and Textual renders a Static's whole content again
(markup → lines → strips) for any dirty row. Over SSH every repainted cell is bytes, and the panel's
number blocks change a few digits twice a second while the rest stays put; rendering the blocks
again was most of what a view cost to draw (~5 ms at 160×48 for the numbers and the roofline).
"""

from __future__ import annotations

from textual.cache import LRUCache
from textual.content import Content
from textual.geometry import Region
from textual.strip import Strip
from textual.visual import Visual, VisualType
from textual.widgets import Static

from mtpwatch.ui.fastpaint.plain import PlainLines
from mtpwatch.ui.fastpaint.rows import RowRefresh
from mtpwatch.ui.widgets.cells import changed_regions

_NEWLINE = Content("\n")


class RowStatic(RowRefresh, PlainLines, Static):
    """`update_lines(previous, markup)` repaints only the rows whose markup line changed, when every
    line is one row (it fits, or the widget does not wrap); otherwise, and when the line count
    changes, it is a plain `update`. While every line is one row, a row is drawn from its own line
    alone (cached per line text, width and style), so a changed row costs that row, not the block.
    Anything else (a wrapped line, a selection, content not aligned top left, a plain `update`)
    draws as a Static does.
    """

    _row_lines: list[str] | None = None
    """The markup of each row, while the rows are drawn line by line (None: as a Static)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._line_strips: LRUCache[tuple[str, int, object], Strip | None] = LRUCache(256)
        self._line_contents: LRUCache[str, Content] = LRUCache(256)

    def _line_content(self, line: str) -> Content:
        """One line's markup parsed, once per distinct text."""
        content = self._line_contents.get(line)
        if content is None:
            content = self._line_contents[line] = Content.from_markup(line)
        return content

    def update_lines(self, previous: str | None, markup: str) -> None:
        """Show `markup`; `previous` is the markup shown before (None: unknown)."""
        old = previous.split("\n") if previous is not None else None
        new = markup.split("\n")
        # The block is its lines joined, each parsed once per distinct text: the same Content as
        # `Content.from_markup(markup)` while no markup tag spans lines, which drawing a row from
        # its own line already needs (tests/ui/test_compositor.py compares both, block by block).
        content = _NEWLINE.join([self._line_content(line) for line in new])
        width = self.content_region.width
        if old is None or len(old) != len(new) or not width:
            self.update(content, layout=old is None or len(old) != len(new))
            self._row_lines = new
            return
        if not self._one_row_per_line(content, width):
            self.update(content, layout=False)  # wrapped lines: rows do not map to lines
            return
        rows = tuple(
            region
            for y, (a, b) in enumerate(zip(old, new, strict=True))
            if a != b
            for region in self._changed_cells(y, a, b, self.size.width)
        )
        with self.refreshing_rows(rows):
            self.update(content, layout=False)
        self._row_lines = new

    def _changed_cells(self, y: int, old: str, new: str, width: int) -> list[Region]:
        """`cells.changed_regions` of row `y` drawn with line `old` and with `new`."""
        if self._row_lines is None:
            return [Region(0, y, width, 1)]
        return changed_regions(y, self._row_strip(old, width), self._row_strip(new, width), width)

    def _one_row_per_line(self, content: Content, width: int) -> bool:
        """Each line of `content` is one row: it fits, or the widget does not wrap (CSS
        `text-wrap: nowrap`: a long line is cut, with `text-overflow`, on its own row)."""
        if self.styles.text_wrap == "nowrap":
            return True
        return all(line.cell_length <= width for line in content.split("\n"))

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        self._row_lines = None  # `update_lines` sets it again after this
        super().update(content, layout=layout)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._line_strips.clear()

    def _row_strip(self, markup: str, width: int) -> Strip | None:
        """Line `markup` drawn as one row (None: it wraps), cached per text, width and style."""
        style = self.visual_style
        key = (markup, width, style)
        if key in self._line_strips:
            return self._line_strips[key]
        line = self._line_content(markup)
        strips = Visual.to_strips(self, line, width, 1, style) if self._one_row_per_line(line, width) else []
        strip = self._line_strips[key] = strips[0] if len(strips) == 1 else None
        return strip

    def render_line(self, y: int) -> Strip:
        lines = self._row_lines
        width = self.size.width
        if (
            lines is None
            or not width
            or self.text_selection is not None
            or self.styles.content_align != ("left", "top")
        ):
            return super().render_line(y)
        if y >= len(lines):
            return Strip.blank(width, self.visual_style.rich_style)
        strip = self._row_strip(lines[y], width)
        if strip is None:  # a line that wraps (or an empty one): rows do not map to lines
            self._row_lines = None
            return super().render_line(y)
        return strip
