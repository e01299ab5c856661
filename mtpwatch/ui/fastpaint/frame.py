"""FrameScreen and `frame_now`: a widget's repaint composed and written at once, on a screen whose
compositor is the RowCompositor (`fastpaint.compositor`) while the fast paint is on (`gate`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from textual.app import ScreenStackError
from textual.dom import NoScreen
from textual.geometry import Region
from textual.screen import Screen
from textual.widget import Widget

from mtpwatch.ui.fastpaint.gate import gate


class FramedWidget(Widget):
    """A widget that may be repainted in a frame composed at once (`frame_now`)."""

    def _frame_ready(self) -> bool:
        """Mounted, and no layout of its own pending (that is the update timer's to do)."""
        return self.is_mounted and not self._layout_required

    def _frame_mark(self, regions: Sequence[Region]) -> None:
        """What `Widget.refresh` does to the widget for a repaint, without queueing the hops."""
        self._layout_cache.clear()
        self._set_dirty(*regions)
        self.clear_cached_dimensions()
        self._rich_style_cache.clear()


class FrameScreen(Screen[None]):
    """A screen on the RowCompositor while the fast paint is on (read when the screen is built:
    `fast_paint`), whose widgets' repaints can then be composed at once (`frame_now`). Off, it is
    Textual's `Screen`."""

    def __init__(self, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.fast_paint = gate().on
        if self.fast_paint:
            from mtpwatch.ui.fastpaint.compositor import RowCompositor  # imported by the gate

            self._compositor = RowCompositor()

    def frame_now(self, repaints: Mapping[FramedWidget, Sequence[Region]]) -> bool:
        app = self.app
        if (
            not self.fast_paint
            or self is not app.screen
            or getattr(app, "_batch_count", 1) > 0  # a batch update is open: frames held until it closes
            or app.is_inline
            or self._layout_required
            or self._scroll_required
            or self._recompose_required
            or self._repaint_required
        ):
            return False
        for widget in repaints:
            try:
                if not widget._frame_ready() or widget.screen is not self:
                    return False
            except NoScreen:  # being removed
                return False
        for widget, regions in repaints.items():
            widget._frame_mark(regions)
        self._compositor.update_widgets({*repaints, *self._dirty_widgets})
        self._compositor_refresh()  # clears the dirty widgets: all were composed above
        return True


def frame_now(repaints: Mapping[FramedWidget, Sequence[Region]]) -> bool:
    """Repaint each widget's regions (its whole area when none) in one frame composed and written now.

    `Widget.refresh` reaches the terminal through four hops of Textual's message loop: a prompt to
    the widget, its idle handler posting an update to the screen, the screen's idle handler resuming
    its update timer, and the timer's next tick (up to 1/60 s later), which composes the screen's
    dirty widgets (`Screen._on_timer_update`). For the answer panes (~16 repaints a second each),
    composing at once took a fifth off one streaming server's CPU (docs/cost.md, paired) and the
    timer's wait off its latency. The same compositor renders the widgets' regions, with any widget
    already waiting for the tick (none is dropped), and draws overlays (a toast, a selection) in
    front as in any frame. It declines (False: the caller refreshes as usual) unless every widget
    is mounted on the screen shown, a `FrameScreen` with the fast paint on, with no layout, scroll,
    recompose or whole-screen repaint pending and no batch update open: those are the timer's to do
    in order. tests/ui/test_compositor.py holds these frames to what Textual's own show.
    """
    try:
        screen = next(iter(repaints)).app.screen
    except (RuntimeError, ScreenStackError):  # no app running (Textual's NoActiveAppError)
        return False
    return isinstance(screen, FrameScreen) and screen.frame_now(repaints)
