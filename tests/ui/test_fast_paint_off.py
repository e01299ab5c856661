"""With the fast paint off (`MTPWATCH_FASTPAINT=0`: plain Textual, as on a release it was not checked
against) the app draws the same screens: the snapshot screens are the same SVGs, a streamed answer
leaves the same cells on the terminal after every step, and the help says which paint is on."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
from pytest_textual_snapshot import normalize_svg
from rich.console import Console
from textual._compositor import CompositorUpdate
from textual._doc import take_svg_screenshot
from textual.pilot import Pilot
from textual.widgets import Markdown

from mtpwatch.ui.app import make_app
from mtpwatch.ui.fastpaint.compositor import RowCompositor
from mtpwatch.ui.fastpaint.gate import ENV, gate
from mtpwatch.ui.widgets.token_stream import TokenStream
from tests.ui import samples
from tests.ui.conftest import WaitUntil, needs_fast_paint
from tests.ui.test_compositor import WORDS, _apply, _pending, _start
from tests.ui.test_snapshots import _run_before
from tests.waits import wait_for

SVGS = Path(__file__).parent / "__snapshots__" / "test_snapshots"

# Each screen of tests/ui/test_snapshots.py: (its SVG, the sample config, the terminal size, keys).
SCREENS = [
    *(
        (f"test_monitor[{mode}-{name}]", mode, mode, size, ())
        for mode in ("single", "ab")
        for name, size in (("compact", (80, 24)), ("wide", (200, 50)))
    ),
    ("test_help_screen", "single", "single", (120, 40), ("f1",)),
    ("test_startup_log", "start", "start", (120, 32), ()),
    ("test_disconnected", "single", "down", (80, 24), ()),
]


@pytest.fixture(params=["on", "off"])
def paint(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The fast paint on (the pinned Textual) or switched off, for the apps the test builds."""
    if request.param == "on" and not gate().on:
        pytest.skip(f"the fast paint cannot be on here ({gate().words()})")
    monkeypatch.setenv(ENV, "1" if request.param == "on" else "0")
    assert gate().on is (request.param == "on")
    return str(request.param)


def _settled(kind: str, keys: tuple[str, ...]) -> Any:
    """test_snapshots.py's set-up, then until the answers' scheduled paints and every repaint have
    reached the screen (a loaded machine takes longer, not another outcome)."""
    before = _run_before(kind, keys)

    async def run_before(pilot: Pilot[Any]) -> None:
        await before(pilot)
        streams = [s for screen in pilot.app.screen_stack for s in screen.query(TokenStream)]
        await wait_for(
            pilot, lambda: not any(s._queued for s in streams) and not _pending(pilot.app), "the paints"
        )

    return run_before


@pytest.mark.parametrize(("svg", "config", "kind", "size", "keys"), SCREENS, ids=[s[0] for s in SCREENS])
def test_the_snapshot_screens_are_the_same_svgs(
    paint: str, svg: str, config: str, kind: str, size: tuple[int, int], keys: tuple[str, ...]
) -> None:
    """The SVG test_snapshots.py holds (compared as pytest-textual-snapshot compares), drawn again on
    and off (on: the comparison itself is sound)."""
    app = make_app(samples.config(config), autostart=False)
    drawn = take_svg_screenshot(app=app, terminal_size=size, run_before=_settled(kind, keys))
    held = normalize_svg((SVGS / f"{svg}.svg").read_text())
    assert normalize_svg(drawn) == held, f"{svg} differs with the fast paint {paint}"


_PRIVATE_MODES = re.compile(r"\x1b\[\?[0-9;]*[A-Za-z]")  # cursor, mouse, synchronized output


async def _streamed_screens(wait_until: WaitUntil, size: tuple[int, int]) -> list[dict[Any, Any]]:
    """A streamed answer, with the numbers changing between, at `size`: the terminal's cells (what
    the app wrote to it, applied) after each step has reached the terminal."""
    app = make_app(samples.config("single"), autostart=False)
    cells: dict[tuple[int, int], tuple[str, str]] = {}
    screens: list[dict[Any, Any]] = []
    async with app.run_test(size=size) as pilot:
        console = Console(width=size[0], color_system="truecolor")
        display = app._display  # a headless app writes nothing: what it would write, applied

        def captured(screen: Any, renderable: Any) -> None:
            if isinstance(renderable, CompositorUpdate) and not app._batch_count:
                _apply(cells, _PRIVATE_MODES.sub("", renderable.render_segments(console)))
            display(screen, renderable)

        app._display = captured  # type: ignore[method-assign]
        panel = await _start(pilot)
        assert isinstance(app.screen._compositor, RowCompositor) is gate().on
        # The terminal as the settled start-up left it, whole: how much of the start-up's own writes
        # came after the hook above depends on how soon the first frame came (a loaded machine moved
        # it); what is compared is what the streaming steps write over it.
        cells.clear()
        full = app.screen._compositor.render_full_update()
        _apply(cells, _PRIVATE_MODES.sub("", full.render_segments(console)))
        base = samples.view_mtp()
        for i in range(40):  # wrapped lines, a jump, the position bar moving
            panel.stream.feed(" ".join(WORDS[i % len(WORDS) : i % len(WORDS) + 3]) + " ")
            panel.stream.flush(final=False)
            if i % 7 == 0:
                tok_s = (base.server_tok_s or 40.0) + i / 10
                panel.show(dataclasses.replace(base, server_tok_s=tok_s, kv_cache_usage=i / 200))
            await wait_until(pilot, lambda: not _pending(app))
            screens.append(dict(cells))
    return screens


@needs_fast_paint
@pytest.mark.parametrize("size", [(160, 48), (80, 24)], ids=["wide", "compact"])
async def test_a_streamed_answer_draws_the_same_cells_on_and_off(
    size: tuple[int, int], wait_until: WaitUntil, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV, "1")
    fast = await _streamed_screens(wait_until, size)
    monkeypatch.setenv(ENV, "0")
    plain = await _streamed_screens(wait_until, size)
    assert len(fast) == len(plain) == 40
    assert fast[-1] != fast[0], "the answer streamed"
    differ = [step for step, (a, b) in enumerate(zip(fast, plain, strict=True)) if a != b]
    assert differ == [], f"the terminal differs after steps {differ}"


async def test_the_help_says_whether_the_fast_paint_is_on(paint: str) -> None:
    app = make_app(samples.config("single"), autostart=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f1")
        await pilot.pause()
        source = app.screen.query_one(Markdown).source
    words = "fast paint: on (Textual " if paint == "on" else "fast paint: off (MTPWATCH_FASTPAINT=0)"
    assert words in source
