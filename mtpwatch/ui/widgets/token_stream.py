"""TokenStream: generated text that accepts tokens at any rate and paints at most 15 times a second."""

from __future__ import annotations

import re
from typing import Any

from textual.widgets import Log


class TokenStream(Log):
    """Generated text. `feed` is cheap per token; a timer flushes the buffer at `FLUSH_HZ`.

    One `Log.write` per token saturates near 1.5 k tok/s (style.md §1.4), so tokens are
    appended to a list and written in one call per frame.
    """

    FLUSH_HZ = 15

    DEFAULT_CSS = """
    TokenStream { height: 1fr; overflow-x: hidden; scrollbar-size-vertical: 1; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_lines=2_000, **kwargs)
        self._pending: list[str] = []
        self._col = 0

    def on_mount(self) -> None:
        self.set_interval(1 / self.FLUSH_HZ, self._tick, name="token-flush")

    def feed(self, text: str) -> None:
        """Queue text (event-loop thread only)."""
        self._pending.append(text)

    def flush(self, *, final: bool = True) -> None:
        """Write whatever is queued, word-wrapped to the pane.

        The timer passes `final=False`: a trailing partial word (tokens are sub-words) waits for
        the next flush so that wrapping never splits it. Tests and the end of an answer flush all.
        """
        if not self._pending:
            return
        text = "".join(self._pending)
        self._pending.clear()
        if not final:
            cut = max(text.rfind(" "), text.rfind("\n")) + 1
            if 0 < len(text) - cut <= 40 and text[-1] not in " \n":
                self._pending.append(text[cut:])
                text = text[:cut]
        if text:
            width = self.scrollable_content_region.width - 1
            wrapped, self._col = wrap_stream(text, self._col, width if width >= 10 else 80)
            self.write(wrapped)

    def _tick(self) -> None:
        self.flush(final=False)

    def start_block(self, header: str) -> None:
        """Flush, end the current line, leave a blank line, and write `header` on its own line."""
        self.flush()
        if self.line_count and self.lines[-1]:
            self.write("\n")
        if self.line_count > 1:
            self.write("\n")
        self._col = 0
        self.feed(header + "\n")
        self.flush()

    def reset(self) -> None:
        """Drop pending and shown text."""
        self._pending.clear()
        self._col = 0
        self.clear()

    @property
    def pending_text(self) -> str:
        """Text not yet painted."""
        return "".join(self._pending)


_WORDS = re.compile(r"\n|[^\S\n]+|\S+")


def wrap_stream(text: str, col: int, width: int) -> tuple[str, int]:
    """Soft-wrap streamed `text` that continues a line already `col` characters long.

    Log does not wrap, and a stream cannot be re-wrapped once written, so words are placed as
    they arrive. Returns the text with newlines inserted and the column where it ends.
    """
    out: list[str] = []
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
    return "".join(out), col
