"""RowCompositor: Textual's (private) compositor, with a partial update rendering only the rows it writes.

For a partial update, Textual 8's `Compositor` takes the box around every dirty region as its crop,
asks every widget whose *clip* (its container's region) overlaps that box to render *all* its lines,
and throws away the lines outside the dirty spans. On the monitor a streamed token dirties one or two
rows of the answer pane, and that made the screen, the panels row, the panel, its body, the metrics
and answer columns and their children render ~300 lines a frame (the metrics column its 39: its
clip, the body, overlaps the answer pane): about two thirds of a streaming monitor's CPU.

Here each widget renders only the rows of its visible region that a dirty span crosses within its
columns, in runs of consecutive rows, skipping a widget no span crosses and a row whose written cells
widgets in front of it already cover. Everything else is Textual's: the same widgets in the same
order (front to back, the first strip of a cut wins), the same cuts and chops. The update writes
each span from its first cell (`CellChopsUpdate`; Textual writes from the start of the widget's
cut), so a widget that refreshes the cells that changed sends those cells. What the terminal shows
is the same: tests/ui/test_compositor.py applies both updates, frame by frame, to a screen of cells
parsed from their bytes and compares the screens. Full updates (layout, resize, the first frame,
screenshots) are Textual's unchanged.

Imported only through the gate (`fastpaint.gate`): `textual._compositor` is a private module.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Console
from rich.control import Control
from textual._compositor import ChopsUpdate, Compositor
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget


class CellChopsUpdate(ChopsUpdate):
    """Textual's `ChopsUpdate`, cropping a chop on the left too (module docstring). A chop holding a
    double-width character is written from its start as Textual does (a crop would split it)."""

    def render_segments(self, console: Console) -> str:
        sequences: list[str] = []
        append = sequences.append
        move_to = Control.move_to
        chops = self.chops
        chop_ends = self.chop_ends
        last_y = self.spans[-1][0]
        for y, x1, x2 in self.spans:
            line = chops[y]
            ends = chop_ends[y]
            for end, (x, strip) in zip(ends, line.items(), strict=False):
                if strip is None or x >= x2 or end <= x1:  # x == x2: an empty crop, a bare cursor move
                    continue
                start = x1 if x < x1 and len(strip.text) == strip.cell_length else x
                append(move_to(start, y).segment.text)
                append(strip.crop(start - x, min(end, x2) - x).render(console))
            if y != last_y:
                append("\n")
        return "".join(sequences)


class RowCompositor(Compositor):
    """`Compositor` whose partial updates render only the rows in the dirty spans (module docstring)."""

    def render_partial_update(self) -> ChopsUpdate | None:  # a CellChopsUpdate
        screen_region = self.size.region
        update_regions = self._dirty_regions.copy()
        self._dirty_regions.clear()
        if not update_regions:
            return None
        visible = (region.intersection(screen_region) for region in update_regions)
        spans = list(self._regions_to_spans(region for region in visible if region.area))
        if not spans:
            return None
        chops = self._render_span_chops(spans)
        chop_ends = [cut_set[1:] for cut_set in self.cuts]
        return CellChopsUpdate(chops, spans, chop_ends)

    def _render_span_chops(self, spans: list[tuple[int, int, int]]) -> Sequence[Mapping[int, Strip | None]]:
        """Textual's `_render_chops` over the rows in `spans` only (module docstring; `_row_wanted`
        says when a widget in front filled a row already)."""
        cuts = self.cuts
        chops: list[dict[int, Strip | None]] = [dict.fromkeys(cut_set[:-1]) for cut_set in cuts]
        by_row: dict[int, list[tuple[int, int]]] = {}
        for y, x1, x2 in spans:
            by_row.setdefault(y, []).append((x1, x2))
        rows = sorted(by_row)
        ends = {y: dict(zip(cuts[y][:-1], cuts[y][1:], strict=True)) for y in rows}
        intersection = Region.intersection
        for widget, (region, clip) in self.visible_widgets.items():
            visible = intersection(region, clip)
            vx, vy, vw, vh = visible
            if not (vw and vh):
                continue
            vx2, vy2 = vx + vw, vy + vh
            run_start = run_end = -1
            for y in rows:
                if y < vy:
                    continue
                if y >= vy2:
                    break
                if not _row_wanted(chops[y], ends[y], by_row[y], vx, vx2):
                    continue
                if y == run_end:
                    run_end += 1
                    continue
                if run_start >= 0:
                    self._fill(chops, widget, region, vx, vw, run_start, run_end)
                run_start, run_end = y, y + 1
            if run_start >= 0:
                self._fill(chops, widget, region, vx, vw, run_start, run_end)
        return chops

    def _fill(
        self,
        chops: list[dict[int, Strip | None]],
        widget: Widget,
        region: Region,
        vx: int,
        vw: int,
        y1: int,
        y2: int,
    ) -> None:
        """Render rows y1..y2 of `widget` (visible columns vx..vx+vw) and fill the chops they are
        first to reach, as Textual's `_render_chops` does (front to back: the first strip of a cut wins)."""
        cuts = self.cuts
        crop = Region(vx - region.x, y1 - region.y, vw, y2 - y1)
        first_cut, last_cut = vx, vx + vw
        for y, strip in zip(range(y1, y2), widget.render_lines(crop), strict=False):
            chops_line = chops[y]
            final_cuts = [cut for cut in cuts[y] if last_cut >= cut >= first_cut]
            cut_strips = strip.divide([cut - vx for cut in final_cuts[1:]])
            get_chops_line = chops_line.get
            for cut, cut_strip in zip(final_cuts, cut_strips, strict=False):
                if get_chops_line(cut) is None:
                    chops_line[cut] = cut_strip


def _row_wanted(
    chops_line: Mapping[int, Strip | None],
    ends: Mapping[int, int],
    row_spans: list[tuple[int, int]],
    vx: int,
    vx2: int,
) -> bool:
    """Whether a widget spanning columns vx..vx2 has anything to give this row: a chop it would fill
    (a cut in vx..vx2, up to its next cut) that is still empty and that a span of the row writes
    (`CellChopsUpdate.render_segments` skips a chop when `x >= x2 or end <= x1`)."""
    for cut, end in ends.items():
        if cut < vx or cut >= vx2 or chops_line[cut] is not None:
            continue
        if any(cut < x2 and end > x1 for x1, x2 in row_spans):
            return True
    return False
