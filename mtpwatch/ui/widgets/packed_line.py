"""PackedLine: a line of labelled groups that takes a second row (or a third) rather than lose a label.

The A/B speed-up line holds the speed-up, its source, its warnings and the k advisor: one row at 160
columns, more at 80. `show(groups)` packs them into the widget's width (`ui.pack`), and the widget
grows to the rows it needs (CSS caps them). It packs again when its width changes, and then also
chooses again between the wordings it was given (the speed-up's `over 3 prompt(s)` or `of 3`).
"""

from __future__ import annotations

from collections.abc import Sequence

from textual import events
from textual.content import Content
from textual.visual import VisualType
from textual.widgets import Static

from mtpwatch.ui.pack import Group, pack


class PackedLine(Static):
    _wordings: tuple[tuple[Group, ...], ...] | None = None
    """What `show` was given, packed again on a resize (None: a plain `update` is shown)."""
    _rows = 1
    """Rows of what is shown: a change of them is a relayout, a change of text alone is not."""

    def show(self, groups: Sequence[Group], *shorter: Sequence[Group]) -> None:
        """Show `groups`, packed into the content width (one row before the first layout), or the
        first of the `shorter` wordings that takes fewer rows there."""
        self._wordings = (tuple(groups), *(tuple(wording) for wording in shorter))
        self._draw()

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        """A plain update (one row per line of `content`); it forgets the groups."""
        self._wordings = None
        rows = None  # a renderable: its rows are unknown, so it relayouts
        if isinstance(content, (str, Content)):
            rows = (content if isinstance(content, str) else content.plain).count("\n") + 1
        self._set(content, rows, layout=layout)

    def _draw(self) -> None:
        if self._wordings is None:
            return
        width = self.content_region.width or None
        texts = [pack(wording, width) for wording in self._wordings]
        text = min(texts, key=lambda packed: packed.count("\n"))  # the first of the fewest rows
        self._set(Content.from_markup(text), text.count("\n") + 1, layout=False)

    def _set(self, content: VisualType, rows: int | None, *, layout: bool) -> None:
        grew = rows is None or rows != self._rows
        self._rows = rows or self._rows
        super().update(content, layout=layout or grew)

    def on_resize(self, event: events.Resize) -> None:
        self._draw()
