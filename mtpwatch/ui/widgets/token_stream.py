"""TokenStream: generated text that accepts tokens at any rate, paints them in batches (every pane in
the same frame), repaints only the rows that changed, and never changes the screen's layout.

Why not `Log`: every new line changes a `Log`'s virtual size, and Textual answers that with a
relayout and repaint of the whole screen (~20-30 ms at 200×50); at 2,000 tok/s that was most of the
app's CPU. This fixed-size pane draws its lines itself (`render_line`): the tail while following, the
whole scroll-back (mouse wheel, PageUp/PageDown: `scroll_lines`) and its own one-column position
bar, so no scrollbar or virtual size is involved and a new line repaints this pane only.

Over SSH every repainted cell is bytes: a paint that only extends the last lines repaints those rows,
and while an answer streams, following scrolls in jumps of a quarter pane (`JUMP`, as a terminal's
jump scroll); when the answer ends the text settles at the bottom again.
"""

from __future__ import annotations

import asyncio
import re
import weakref
from typing import Any

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.cache import LRUCache
from textual.geometry import Region
from textual.strip import Strip

from mtpwatch.ui.fastpaint.frame import FramedWidget, frame_now
from mtpwatch.ui.fastpaint.plain import PlainLines

PROMPT_MARK = "▶ "
"""Lines starting with this are the prompt of a block (drawn bold, accent colour)."""
CANCEL_MARK = "■ cancelled"
"""Line appended when the user cancels an answer (warning colour)."""


class TokenStream(FramedWidget, PlainLines, can_focus=False):
    """Generated text. `feed` is one list append per token; the first text after a paint schedules the
    next paint (`_Painter`: `FLUSH_DELAY_S` later, `MIN_PAINT_INTERVAL_S` after the previous one; no
    timer runs while nothing arrives). Lines are soft-wrapped as they arrive (`wrap_stream`), one
    column narrower than the pane (the last is the position bar, drawn when the text is taller).
    """

    FLUSH_DELAY_S = 0.02
    """Arrival → paint: chunks arriving meanwhile share the paint."""
    MIN_PAINT_INTERVAL_S = 0.04
    """At most 25 paints a second by default, whatever the token rate (a fast stream costs per
    frame); `min_paint_interval_s` sets it per pane (`--fps`)."""
    JUMP = 4
    """While streaming, following scrolls by 1/JUMP of the pane's height at a time."""
    MAX_LINES = 2_000
    MAX_RAW_CHARS = 400_000
    WHEEL_LINES = 3

    COMPONENT_CLASSES = {"token-stream--prompt", "token-stream--cancelled", "token-stream--bar"}

    DEFAULT_CSS = """
    TokenStream {
        height: 1fr;
        & > .token-stream--prompt { text-style: bold; color: $text-accent; }
        & > .token-stream--cancelled { text-style: bold; color: $text-warning; }
        & > .token-stream--bar { color: $scrollbar; }
    }
    """

    def __init__(self, *, min_paint_interval_s: float | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lines: list[str] = []
        """The wrapped lines written so far (the last one may still grow)."""
        self._raw: list[str] = []
        """Everything appended, unwrapped (re-wrapped when the pane's width changes)."""
        self._raw_chars = 0
        self._wrapped_at = 0
        self._pending: list[str] = []
        self._queued = False
        self._top = 0
        """First line shown when not following."""
        self.following = True
        """True: the pane shows the newest lines; False: the user scrolled back."""
        self._follow_top = 0
        """First line shown while following (moves in jumps while streaming)."""
        self._strips: LRUCache[tuple[str, int, str], Strip] = LRUCache(512)
        self._styles: dict[str, Style] = {}
        self._frame_top = 0
        self.min_paint_interval_s = (
            self.MIN_PAINT_INTERVAL_S if min_paint_interval_s is None else min_paint_interval_s
        )
        self._frame: dict[FramedWidget, list[Region]] | None = None
        """While the painter paints: the frame this pane's repaints join (`_repaint`)."""

    def on_unmount(self) -> None:
        painter = _PAINTERS.get(asyncio.get_running_loop())
        if self._queued and painter is not None:
            painter.due.pop(self, None)
        self._queued = False

    # -- text in -------------------------------------------------------------------------------

    def feed(self, text: str) -> None:
        """Queue text (event-loop thread only); the next paint of the panes shows it."""
        self._pending.append(text)
        if not self._queued:
            loop = asyncio.get_running_loop()
            self._queued = True
            painter = _PAINTERS.get(loop)
            if painter is None:
                painter = _PAINTERS[loop] = _Painter(loop)
            painter.want(self)

    def flush(self, *, final: bool = True) -> None:
        """Wrap and append whatever is queued, then repaint what changed (never the layout).
        `final=False` (the scheduled paint, mid-answer) lets following scroll in jumps; a final flush
        (the end of an answer, tests) settles the text at the bottom of the pane."""
        if self._pending:
            text = "".join(self._pending)
            self._pending.clear()
            self._append(text)
        if final and self.following and self._settle():
            self.refresh()

    def _settle(self) -> bool:
        """Following: put the last line at the bottom again; True if that moved it."""
        bottom = max(0, len(self.lines) - self.content_region.height)
        moved = self._follow_top != bottom
        self._follow_top = bottom
        return moved

    def _bar(self) -> tuple[int, int]:
        """(start, size) of the position bar's thumb, (0, 0) when there is none."""
        height = self.content_region.height
        total = len(self.lines)
        if not total > height > 0:
            return 0, 0
        size = max(1, height * height // total)
        start = min(height - size, self.top * height // total) if not self.following else height - size
        return start, size

    def _append(self, text: str) -> None:
        self._raw.append(text)
        self._raw_chars += len(text)
        while self._raw_chars > self.MAX_RAW_CHARS and len(self._raw) > 1:
            self._raw_chars -= len(self._raw.pop(0))
        width = self._text_width()
        self._wrapped_at = width
        top_before, bar_before = self.top, self._bar()
        if not self.lines:
            self.lines.append("")
        # The last line is wrapped again with the new text: a word cut by a chunk boundary that no
        # longer fits moves to the next line whole.
        first = len(self.lines) - 1
        tail = self.lines.pop()
        self.lines.extend(wrap_stream(tail + text, width).split("\n"))
        excess = len(self.lines) - self.MAX_LINES
        if excess > 0:
            del self.lines[:excess]
            self._top = max(0, self._top - excess)
            self._follow_top = max(0, self._follow_top - excess)
        height = self.content_region.height
        if self.following and height > 0 and len(self.lines) > self._follow_top + height:
            # Jump: the last line lands 1/JUMP of the pane above the bottom.
            self._follow_top = max(0, len(self.lines) - height + height // self.JUMP)
        if not (self.following or excess > 0):
            return  # a scrolled-back view only changes when lines were dropped
        top = self.top
        if excess > 0 or top != top_before or height <= 0:
            self._repaint()
            return
        # Only the rows from the old last line down changed (and the bar, if it moved); on the old
        # last line, only from where it changed (over SSH every repainted cell is bytes).
        y0, y1 = max(0, first - top), min(height, len(self.lines) - top)
        width = self.content_region.width
        regions = []
        if y1 > y0:
            x0, x1 = _changed_span(tail, self.lines[first], width) if first - top == y0 else (0, width - 1)
            if x1 > x0:
                regions.append(Region(x0, y0, x1 - x0, 1))
            if y1 > y0 + 1:
                regions.append(Region(0, y0 + 1, width - 1, y1 - y0 - 1))
        regions.extend(self._bar_changes(bar_before, self._bar()))
        if regions:
            self._repaint(*regions)

    def _repaint(self, *regions: Region) -> None:
        """Repaint `regions` (the pane when none) in a frame composed now (`frame_now`): the
        painter's, which every pane with new text shares, while it paints; else one of its own;
        `refresh` when `frame_now` declines."""
        frame = self._frame
        if frame is None:
            if not frame_now({self: regions}):
                self.refresh(*regions)
        elif not regions or (self in frame and not frame[self]):
            frame[self] = []  # the whole pane
        else:
            frame.setdefault(self, []).extend(regions)

    def _bar_changes(self, before: tuple[int, int], after: tuple[int, int]) -> list[Region]:
        """The bar's cells that differ between two thumbs: the rows that joined or left the thumb,
        the whole column when the bar appears or goes (every container around the pane composes
        each repainted row)."""
        if before == after:
            return []
        x, height = self.content_region.width - 1, self.content_region.height
        if before[1] == 0 or after[1] == 0:
            return [Region(x, 0, 1, height)]
        old = set(range(before[0], before[0] + before[1]))
        new = set(range(after[0], after[0] + after[1]))
        return [Region(x, y, 1, 1) for y in sorted(old ^ new)]

    def _tick(self, frame: dict[FramedWidget, list[Region]]) -> None:
        """The painter's paint: wrap what is queued; the regions to repaint go into `frame`."""
        self._queued = False
        if self._pending and self.is_mounted:
            self._frame = frame
            try:
                self.flush(final=False)
            finally:
                self._frame = None

    def start_block(self, header: str) -> None:
        """Flush, leave a blank line, write `header` on its own line and follow the new text."""
        self.flush()
        if self.lines and self.lines[-1]:
            self._append("\n")
        if len(self.lines) > 1:
            self._append("\n")
        self.following = True
        self.feed(header + "\n")
        self.flush()

    def finish(self, *, cancelled: bool = False) -> None:
        """End the answer: flush everything and, if cancelled, say so under the partial text."""
        self.flush()
        if cancelled:
            if self.lines and self.lines[-1]:
                self._append("\n")
            self._append(CANCEL_MARK + "\n")
            self.flush()

    def reset(self) -> None:
        self._pending.clear()
        self.lines.clear()
        self._raw.clear()
        self._raw_chars = 0
        self._top = 0
        self._follow_top = 0
        self.following = True
        self.refresh()

    @property
    def pending_text(self) -> str:
        """Text not yet painted."""
        return "".join(self._pending)

    # -- scrolling -----------------------------------------------------------------------------

    def _text_width(self) -> int:
        width = self.content_region.width - 1  # the last column is the position bar
        return width if width >= 10 else 80

    @property
    def top(self) -> int:
        """Index of the first line shown."""
        height = self.content_region.height
        total = len(self.lines)
        bottom = max(0, total - height)
        if self.following:
            # After a jump the last lines sit above the bottom; never past the last line.
            return max(bottom, min(self._follow_top, total - 1))
        return min(self._top, bottom)

    def scroll_lines(self, delta: int) -> None:
        """Scroll by `delta` lines (negative: back in time); reaching the end follows again."""
        height = self.content_region.height
        bottom = max(0, len(self.lines) - height)
        top = min(max(self.top + delta, 0), bottom)
        self._top = top
        self.following = top >= bottom
        if self.following:
            self._follow_top = bottom
        self.refresh()

    def page(self, direction: int) -> None:
        self.scroll_lines(direction * max(1, self.content_region.height - 1))

    def _on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        event.stop()
        self.scroll_lines(-self.WHEEL_LINES)

    def _on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        event.stop()
        self.scroll_lines(self.WHEEL_LINES)

    # -- drawing -------------------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()
        self._strips.clear()

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            base = self.rich_style
            style = base if name == "" else base + self.get_component_rich_style(name)
            self._styles[name] = style
        return style

    def render_lines(self, crop: Region) -> list[Strip]:
        self._frame_top = self.top
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        width = self.content_region.width
        index = self._frame_top + y
        start, size = self._bar()
        bar = ("┃" if start <= y < start + size else "│") if size else " "
        line = self.lines[index] if index < len(self.lines) else ""
        key = (line, width, bar)
        strip = self._strips.get(key)
        if strip is None:
            name = _line_style(line)
            base = self._style("")
            text = Strip([Segment(line, self._style(name))]).crop_extend(0, max(0, width - 1), base)
            strip = Strip.join([text, Strip([Segment(bar, self._style("token-stream--bar"))], 1)])
            self._strips[key] = strip
        return strip

    def on_resize(self, event: events.Resize) -> None:
        self._strips.clear()
        width = self._text_width()
        if self._raw and width != self._wrapped_at:  # wrap the whole text again at the new width
            self._wrapped_at = width
            self.lines = wrap_stream("".join(self._raw), width).split("\n")[-self.MAX_LINES :]
            self._top = min(self._top, max(0, len(self.lines) - 1))
            self._settle()
            self.refresh()
        elif self.following and self._settle():
            # A new height alone (a row above appeared or went): the tail goes back to the bottom,
            # whenever the layout lands (before or after the last flush: the same picture).
            self.refresh()


def _line_style(line: str) -> str:
    """The component class a line is drawn in ('' for plain text): see `TokenStream.render_line`."""
    if line.startswith(PROMPT_MARK):
        return "token-stream--prompt"
    return "token-stream--cancelled" if line == CANCEL_MARK else ""


def _changed_span(old: str, new: str, width: int) -> tuple[int, int]:
    """The columns [x0, x1) of a row drawn as `new` that differ from `old`: from the first changed
    character to the end of the longer text; the row's whole text width when the line's style
    changed or a character is not one column wide (cells are not characters then)."""
    text_width = max(0, width - 1)  # the last column is the position bar's
    if _line_style(old) != _line_style(new) or not (old + new).isascii():
        return 0, text_width
    x0 = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new)))
    return x0, min(text_width, max(len(old), len(new)))


class _Painter:
    """Paints every pane with queued text at once: two answers streaming side by side share one
    frame, composed as the paint ends (`frame_now`)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.handle: asyncio.TimerHandle | None = None
        self.due: dict[TokenStream, None] = {}
        self.painted_at = float("-inf")

    def want(self, stream: TokenStream) -> None:
        self.due[stream] = None
        if self.handle is None:
            wait = self.painted_at + stream.min_paint_interval_s - self.loop.time()
            self.handle = self.loop.call_later(max(TokenStream.FLUSH_DELAY_S, wait), self.paint)

    def paint(self) -> None:
        self.handle = None
        self.painted_at = self.loop.time()
        due, self.due = self.due, {}
        frame: dict[FramedWidget, list[Region]] = {}
        try:
            for stream in due:
                stream._tick(frame)
            if frame and not frame_now(frame):
                for widget, regions in frame.items():
                    widget.refresh(*regions)
        except Exception as error:  # raised again in a pane's message loop: the app ends and shows it,
            next(iter(due)).call_next(_raise, error)  # as for an error in Textual's own frames


def _raise(error: Exception) -> None:
    raise error


_PAINTERS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Painter] = weakref.WeakKeyDictionary()


_WORDS = re.compile(r"\n|[^\S\n]+|\S+")


def wrap_stream(text: str, width: int) -> str:
    """Soft-wrap `text`, which starts a line, to `width`: the text with newlines inserted (a word
    wider than the width is cut)."""
    out: list[str] = []
    col = 0
    for piece in _WORDS.findall(text):
        if piece == "\n":
            out.append("\n")
            col = 0
        elif piece.isspace():
            if col + len(piece) > width:
                out.append("\n")
                col = 0
            else:
                out.append(piece)
                col += len(piece)
        else:
            if col and col + len(piece) > width:
                out.append("\n")
                col = 0
            while len(piece) > width:
                out.append(piece[:width] + "\n")
                piece = piece[width:]
            out.append(piece)
            col += len(piece)
    return "".join(out)
