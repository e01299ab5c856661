"""PlainLines: a widget's rows rendered without Textual's per-row styling pass, when it has nothing to style.

Textual renders every row of a widget through `StylesCache.render_line`, which draws the borders,
padding, outline, hatch, tint and opacity around the widget's own `render_line` and builds a new
strip from the result (so the app's line filters run again on a row the widget had cached, their
cache being per strip). For a widget with none of these that pass is pure overhead (two rows of the
answer pane, headless: 74 → 48 µs); with the race's two panes scrolling 25 times a second, skipping
it took 7 % off the app's CPU (docs/cost.md). Here such a widget's row is its own strip, fitted to
its width in its background, through the app's line filters: the strip `StylesCache` returns for it,
cell for cell and style for style (tests/ui/test_plain_lines.py compares the two on every row of
every such widget of the sample screens, in both themes and under a line filter). Anything else, and
the fast paint off (`fastpaint.gate`), renders as Textual does.
"""

from __future__ import annotations

from textual.geometry import Region, Spacing
from textual.strip import Strip
from textual.style import Style
from textual.widget import Widget

from mtpwatch.ui.fastpaint.gate import gate

_NO_SPACING = Spacing(0, 0, 0, 0)


class PlainLines(Widget):
    """Renders its rows with `render_plain` while it `is_plain`, else as any widget does."""

    def render_lines(self, crop: Region) -> list[Strip]:
        if self.is_plain():
            return self.render_plain(crop)
        return super().render_lines(crop)

    def is_plain(self) -> bool:
        """Nothing for `StylesCache` to draw around or over the rows: no border (or border label),
        padding, outline, hatch, tint, text opacity or opacity (its own or an ancestor's), no
        scrollbar, no link under the mouse to restyle; while the fast paint is on (`gate`, read
        first: off, no private name is read)."""
        if not gate().on:
            return False
        styles = self.styles
        if (
            self.BLANK
            or self._border_title is not None
            or self._border_subtitle is not None
            or styles.padding != _NO_SPACING
            or any(edge for edge, _ in styles.border)
            or any(edge for edge, _ in styles.outline)
            or styles.tint.a
            or styles.text_opacity != 1.0
            or (styles.has_rule("hatch") and styles.hatch != "none")
            or self.opacity != 1.0
        ):
            return False
        if self.content_region.size != self.region.size:  # a scrollbar's gutter
            return False
        return not (self.auto_links and self.hover_style.link_id and "@click" in self.hover_style.meta)

    def render_plain(self, crop: Region) -> list[Strip]:
        """The rows of `crop` as `StylesCache.render_widget` renders them for a plain widget
        (`is_plain`): each row's strip fitted to the widget's width in its background, through the
        app's line filters, cut to the crop's columns."""
        width = self.region.width
        base_background, background = self.background_colors
        fill = Style(background=base_background + background).rich_style
        filters = self.get_line_filters()
        render_line = self.render_line
        strips = []
        for y in crop.line_range:
            strip = render_line(y).adjust_cell_length(width, fill)
            for line_filter in filters:
                strip = strip.apply_filter(line_filter, background)
            strips.append(strip)
        x1, x2 = crop.column_span
        if (x1, x2) != (0, width):
            strips = [strip.crop(x1, x2) for strip in strips]
        return strips
