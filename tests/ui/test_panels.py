"""The roofline panel, the verdict, the hardware line and the answer pane, from fixed inputs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from textual.content import Content

from mtpwatch.core.metrics.snapshot import MetricsSnapshot
from mtpwatch.core.roofline.nvml import HardwareReading
from mtpwatch.session.diagnosis import DRAFTER_MISMATCH, MTP_SLOWER, ab_warnings, make_verdict
from mtpwatch.session.views import BandwidthView, describe_hardware
from mtpwatch.ui.markup.ab import speedup_groups
from mtpwatch.ui.markup.roofline import render_bandwidth
from mtpwatch.ui.pack import pack
from tests.feeds import monitor_of
from tests.ui.conftest import panel_rows
from tests.ui.refreshes import record_refreshes, record_relayouts

ROOF = BandwidthView(
    gpu="GB10",
    peak_gbps=273.0,
    effective_gbps=229.0,
    percent_of_peak=84.0,
    k=2,
    tau=2.2,
    tau_source="measured",
    ceiling_baseline_tok_s=29.3,
    ceiling_spec_tok_s=64.0,
    tok_s=38.0,
    pct_of_ceiling=59.0,
    acceptance_term=2.2,
    bandwidth_term=2.18,
    compute_term=None,
    binding="bandwidth",
    summary="bandwidth-bound at 84 % of GB10's peak (229 of 273 GB/s, analytic)",
    context_tokens=1234,
    context_source="KV-cache occupancy, engine-wide",
)


def _verdict(**kw: Any) -> tuple[str, str]:
    args: dict[str, Any] = {
        "speculative": True,
        "acceptance_rate": 0.6,
        "mean_acceptance_length": 2.2,
        "drafts": 100.0,
        "bandwidth": ROOF,
        "window": "10 s",
    }
    args.update(kw)
    return make_verdict(**args)


def test_verdict_flags_a_mismatched_drafter_only_with_enough_drafts() -> None:
    text, level = _verdict(acceptance_rate=0.01, mean_acceptance_length=1.02, drafts=60.0)
    assert level == "bad" and DRAFTER_MISMATCH in text
    text, level = _verdict(acceptance_rate=0.01, mean_acceptance_length=1.02, drafts=10.0)
    assert text.startswith("hint: ") and level == "warn"  # too few drafts: a hint, not a failure


def test_verdict_low_mean_length_and_paying_off() -> None:
    text, level = _verdict(acceptance_rate=0.08, mean_acceptance_length=1.15)
    assert level == "warn" and "1.15" in text
    text, level = _verdict(method="mtp")
    assert level == "good" and text.startswith("MTP is paying off") and "2.18×" in text
    text, level = _verdict(bandwidth=replace(ROOF, bandwidth_term=0.9))
    assert level == "bad" and "costs more" in text


def test_verdict_baseline_and_no_drafts() -> None:
    assert _verdict(speculative=False)[0].startswith("no speculation")
    text, level = _verdict(drafts=0.0, acceptance_rate=None, mean_acceptance_length=None)
    assert level == "info" and "no drafts" in text


def test_roofline_panel_highlights_the_binding_term_and_says_where_context_came_from() -> None:
    text = render_bandwidth(ROOF, "10 s", width=200)
    assert "[b reverse $accent] bandwidth 2.18 [/]" in text
    assert "acceptance 1+α·k 2.20" in text and "compute —" in text
    assert "1,234 tokens" in text and "KV-cache occupancy" in text
    plain = Content.from_markup(text).plain
    assert "229 GB/s = 84 % of GB10's 273 GB/s peak" in plain and "= 59 % of it" in plain
    assert ROOF.summary in text
    narrow = render_bandwidth(ROOF, "10 s", width=40)
    assert narrow.count("\n") > text.count("\n")  # the summary wraps to the panel


def test_hardware_line_from_fake_readings() -> None:
    gpm = HardwareReading(
        source="nvml+gpm",
        device_name="NVIDIA H100 80GB HBM3",
        dram_bw_util_pct=71.0,
        dram_gbps=2378.5,
        peak_gbps=3350.0,
        memory_busy_pct=64.0,
        interval_s=1.0,
    )
    line = describe_hardware(gpm, local=True)
    assert "GPM DRAM 2378 GB/s = 71 % of peak" in line or "GPM DRAM 2379 GB/s = 71 % of peak" in line
    assert "memory busy 64 % (time, not bandwidth)" in line
    gb10 = HardwareReading(
        source="nvml",
        device_name="NVIDIA GB10",
        reason="GPM not supported on this GPU: bandwidth on NVIDIA GB10 is analytic (no hardware counter)",
        memory_busy_pct=None,
    )
    line = describe_hardware(gb10, local=True)
    assert "bandwidth on NVIDIA GB10 is analytic" in line and "GB/s" not in line
    assert describe_hardware(None, local=False).startswith("hardware: analytic only (remote server")
    assert "simulated" in describe_hardware(gpm, local=True, simulated=True)


def test_kv_context_prefers_engine_occupancy() -> None:
    from mtpwatch.session.bandwidth_inputs import BandwidthModel as _BandwidthModel

    snap = MetricsSnapshot(kv_cache_usage=0.25, cache_config={"num_gpu_blocks": "100", "block_size": "16"})
    assert _BandwidthModel.context(snap, 999) == (400, "KV-cache occupancy, engine-wide")
    idle = MetricsSnapshot(kv_cache_usage=0.0, cache_config={"num_gpu_blocks": "100", "block_size": "16"})
    assert _BandwidthModel.context(idle, 300) == (300, "last prompt: prompt + generated")
    assert _BandwidthModel.context(None, None)[0] == 0


def test_speedup_line_flags_mtp_slower() -> None:
    warnings = ab_warnings([0.8, 0.9, 0.85], method="MTP", race=False, models=("m", "m"))
    slower = speedup_groups(0.8, 0.85, 3, race=False, label="B/A", warnings=warnings)
    assert "MTP " + MTP_SLOWER in pack(slower, None)
    assert MTP_SLOWER not in pack(speedup_groups(2.1, 2.0, 3, race=False, label="B/A"), None)


@pytest.mark.parametrize("slow", [True, False])
async def test_ab_screen_flags_mtp_slower_on_the_last_prompts(slow: bool) -> None:
    from mtpwatch.session.views import Answer, PromptSummary
    from mtpwatch.ui.app import make_app
    from tests.ui import samples

    app = make_app(samples.config("ab"), autostart=False)
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        assert str(app.screen.query_one("#speedup").render()).startswith("speed-up B/A ")  # waiting
        await samples.load(app, "ab")  # A: no speculation, B: MTP
        screen = monitor_of(app.screen)
        # which arm speculates is read from the sources, not from the panels
        screen.feeds[:] = [
            samples.StillSource(samples.view_baseline()),
            samples.StillSource(samples.view_mtp()),
        ]
        screen.ab.speedups.clear()
        mtp_tok_s = 15.0 if slow else 40.0
        for _ in range(3):
            a = Answer(PromptSummary(tokens=8, ttft_s=0.1, decode_tok_s=20.0))
            b = Answer(PromptSummary(tokens=8, ttft_s=0.1, decode_tok_s=mtp_tok_s))
            screen.ab.show_comparison(a, b)
        await pilot.pause()
        line = str(screen.query_one("#speedup").render())
        # one wording before and after the first prompt (it said "MTP/baseline" after)
        assert line.startswith("speed-up B/A: last ") and "baseline" not in line.split("·")[0]
        assert (MTP_SLOWER in line) is slow


async def test_answer_pane_scrolls_back_and_rewraps() -> None:
    from textual.app import App, ComposeResult

    from mtpwatch.ui.widgets.token_stream import TokenStream

    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield TokenStream()

    app = Host()
    async with app.run_test(size=(60, 10)) as pilot:
        stream = app.query_one(TokenStream)
        stream.start_block("▶ prompt")
        stream.feed(" ".join(f"word{i}" for i in range(200)))
        stream.finish()
        assert stream.following and stream.top == len(stream.lines) - 10
        stream.scroll_lines(-5)
        assert not stream.following and stream.top == len(stream.lines) - 15
        stream.feed(" more")
        stream.flush()
        assert stream.top == len(stream.lines) - 15  # a scrolled-back view stays put
        stream.page(+1)
        assert stream.following
        wide = len(stream.lines)
        await pilot.resize_terminal(120, 10)
        await pilot.pause()
        assert len(stream.lines) < wide  # re-wrapped to the new width
        assert max(len(line) for line in stream.lines) <= 119


async def test_answer_pane_repaints_rows_and_jumps_while_streaming() -> None:
    from textual.app import App, ComposeResult
    from textual.geometry import Region

    from mtpwatch.ui.widgets.token_stream import TokenStream

    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield TokenStream()

    app = Host()
    async with app.run_test(size=(41, 12)) as pilot:
        stream = app.query_one(TokenStream)
        await pilot.pause()
        height = stream.content_region.height
        dirty = record_refreshes(stream)
        # A word cut by a chunk boundary stays whole: the last line is wrapped again.
        stream.feed("a" * 30 + " suffi")
        stream.flush(final=False)
        stream.feed("xation")
        stream.flush(final=False)
        assert [line.rstrip() for line in stream.lines] == ["a" * 30, "suffixation"]
        # Extending the last lines repaints those rows only, not the pane.
        dirty.clear()
        stream.feed(" more")
        stream.flush(final=False)
        assert dirty and all(regions and all(r.height <= 2 for r in regions) for regions in dirty)
        # On the last row only the new cells: over SSH every repainted cell is bytes.
        assert [line.rstrip() for line in stream.lines] == ["a" * 30, "suffixation more"]
        dirty.clear()
        stream.feed(" tail")
        stream.flush(final=False)
        assert dirty == [(Region(16, 1, 5, 1),)]
        # Overflowing while streaming jumps by a quarter pane: the last line sits above the bottom and
        # the following lines land in the free rows without moving the rest.
        tops = set()
        for i in range(3 * height):
            stream.feed(f" w{i:02d}" * 8)
            stream.flush(final=False)
            assert 0 <= len(stream.lines) - 1 - stream.top < height  # the newest line is on screen
            tops.add(stream.top)
        assert 1 < len(tops) < 3 * height // 2  # it moved, in jumps, not line by line
        # The end of the answer settles the text at the bottom.
        stream.finish()
        assert stream.top == len(stream.lines) - height


def test_the_method_is_named_only_when_known() -> None:
    """An ngram server is not "MTP"; an unknown method is "speculative"/"speculation"."""
    from mtpwatch.session.views import ServerView, spec_label
    from mtpwatch.ui.markup.panel import render_header

    assert spec_label("ngram", 4) == "ngram k=4"
    assert spec_label("mtp", 2) == "MTP k=2" and spec_label("qwen3_next_mtp", 2) == "MTP k=2"
    assert spec_label("eagle3", 3) == "EAGLE-3 k=3"
    assert spec_label(None, 4) == "speculative k=4"
    text, _ = _verdict(method="ngram", mean_acceptance_length=4.74, bandwidth=BandwidthView())
    assert text.startswith("ngram: 4.74 tokens per verify step") and "MTP" not in text
    text, _ = _verdict(mean_acceptance_length=4.74, bandwidth=BandwidthView())
    assert text.startswith("speculation: 4.74") and "MTP" not in text
    view = ServerView(label="A", url="http://127.0.0.1:8000", status="up", speculative=True, k=4)
    assert "speculative k=4" in render_header(view) and "MTP" not in render_header(view)
    assert "ngram k=4" in render_header(replace(view, method="ngram"))


def test_compact_numbers_carry_the_three_headline_numbers() -> None:
    """80×24: tok/s, acceptance with per-position in one line, bandwidth against the peak."""
    from mtpwatch.session.views import ServerView
    from mtpwatch.ui.markup.panel import compact_numbers

    view = ServerView(
        label="B",
        url="http://127.0.0.1:8000",
        status="up",
        speculative=True,
        k=2,
        acceptance_rate=0.58,
        mean_acceptance_length=2.16,
        per_position=(0.724, 0.436),
        server_tok_s=38.2,
        bandwidth=ROOF,
    )
    acc, speed, gauges = Content.from_markup(compact_numbers(view, 78)).plain.split("\n")
    assert acc == "accept 58 % · len 2.16 · pos 72 44 % (server, 10 s, engine-wide)"
    assert speed.startswith("38.2 tok/s") and "BW 84 % of 273 GB/s (analytic, 10 s)" in speed
    assert gauges == "KV — · run — · wait — (server, now)"
    # 80×24 puts the gauges on the border: two lines, the labels whole
    assert Content.from_markup(compact_numbers(view, 78, gauges=False)).plain.split("\n") == [acc, speed]


@pytest.mark.parametrize("size", [(160, 48), (80, 24)])
async def test_a_new_view_repaints_rows_not_the_whole_panel(size: tuple[int, int]) -> None:
    """Over SSH every repainted cell is bytes: a view whose digits moved must not repaint the panel
    (Textual repaints a widget whole when its border title is assigned, even the same title)."""
    from textual.geometry import Region

    from mtpwatch.ui.app import make_app
    from mtpwatch.ui.widgets.server_panel import ServerPanel
    from tests.ui import samples

    app = make_app(samples.config("single"), autostart=False)
    async with app.run_test(size=size) as pilot:
        await samples.load(app, "single")
        await pilot.pause()
        panel = app.screen.query_one(ServerPanel)
        whole: list[str] = []
        refresh = panel.refresh

        def spy(*regions: Region, **kwargs: bool) -> ServerPanel:
            if not regions:
                whole.append("panel")
            return refresh(*regions, **kwargs)

        panel.refresh = spy  # type: ignore[method-assign]
        base = samples.view_mtp()
        for tok_s in (41.0, 42.5, 40.2):
            panel.show(replace(base, server_tok_s=tok_s))
            await pilot.pause()
        assert whole == []
        # A status change still repaints it (80×24 carries the status in the border title).
        panel.show(replace(base, status="down"))
        await pilot.pause()
        assert whole


@pytest.mark.parametrize("fps", [4, 25])
async def test_fps_caps_the_paints_of_a_streaming_answer(fps: int) -> None:
    """`--fps N`: tokens arriving every 10 ms are painted at most N times a second."""
    import asyncio

    from mtpwatch.ui.app import make_app
    from mtpwatch.ui.widgets.server_panel import ServerPanel
    from tests.ui import samples

    config = samples.config("single")
    config = replace(config, display=replace(config.display, max_fps=fps))
    app = make_app(config, autostart=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await samples.load(app, "single")
        await pilot.pause()
        stream = app.screen.query_one(ServerPanel).stream
        paints = 0
        tick = stream._tick

        def counted(frame: dict[Any, Any]) -> None:
            nonlocal paints
            paints += 1
            tick(frame)

        stream._tick = counted  # type: ignore[method-assign]
        loop = asyncio.get_running_loop()
        start = loop.time()
        # Two seconds of tokens, and on until it painted three times while they arrive (a condition,
        # not a rate: a loaded machine paints later, and less often than `fps`).
        while loop.time() - start < 2.0 or paints < 3:
            assert loop.time() - start < 120, f"{paints} paints in 120 s of tokens"
            stream.feed(" token")
            await asyncio.sleep(0.01)
        elapsed = loop.time() - start
        assert paints <= fps * elapsed + 1


async def test_a_block_that_gets_shorter_keeps_its_rows_and_the_screen_is_not_laid_out_again() -> None:
    """The roofline's verdict wraps to three lines or two as a prompt starts and ends: each change
    of a block's height was a relayout of the whole screen. A block keeps its rows (blank at its
    end) while the panel's size holds; a resize lets it shrink. (260 and 250 columns: no
    roofline line is wider than the block, so only the summary's wrapping changes its rows.)"""
    from mtpwatch.ui.app import make_app
    from mtpwatch.ui.widgets.row_static import RowStatic
    from mtpwatch.ui.widgets.server_panel import ServerPanel
    from tests.ui import samples
    from tests.waits import wait_for

    app = make_app(samples.config("single"), autostart=False)
    async with app.run_test(size=(260, 60)) as pilot:
        await samples.load(app, "single")
        await pilot.pause()
        panel = app.screen.query_one(ServerPanel)
        block = panel.query_one(".bandwidth", RowStatic)
        base = samples.view_mtp()
        assert base.bandwidth is not None
        long = replace(base, bandwidth=replace(base.bandwidth, summary="below the roof " * 30))
        short = replace(base, bandwidth=replace(base.bandwidth, summary="bandwidth-bound"))
        panel.show(long)
        tall = panel_rows(panel)["bandwidth"].count("\n") + 1
        await wait_for(pilot, lambda: block.size.height == tall, f"the long block's {tall} rows")
        layouts = record_relayouts(app.screen)
        for view in (short, long, short):
            panel.show(view)
            await pilot.pause()
            assert block.size.height == tall
        assert not layouts
        shown = panel_rows(panel)["bandwidth"]
        assert "bandwidth-bound" in shown and not shown.endswith("\n")  # what was asked, unpadded
        assert Content.from_markup(shown).plain.count("\n") + 1 < tall
        await pilot.resize_terminal(250, 60)  # the panel draws the same view again at its new size
        rows = shown.count("\n") + 1
        await wait_for(pilot, lambda: block.size.height == rows, f"the block at its own {rows} rows")


async def test_typing_a_prompt_relayouts_nothing_and_a_long_one_scrolls_to_its_end() -> None:
    """Textual's `Input` resizes its virtual size on every keystroke, a layout change: the whole
    screen was laid out again for each key, paste and clear while the panels stream."""
    from mtpwatch.ui.app import make_app
    from mtpwatch.ui.widgets.prompt_input import PromptInput
    from tests.ui import samples

    app = make_app(samples.config("single"), autostart=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await samples.load(app, "single")
        await pilot.pause()
        box = app.screen.query_one(PromptInput)
        box.focus()
        box.value = ""
        await pilot.pause()
        layouts = record_relayouts(app.screen)
        text = "the quick brown fox jumps over the lazy dog " * 3 + "END"
        await pilot.press(*text)
        await pilot.pause()
        assert box.value == text and not layouts
        shown = box.render_line(0).text
        assert "END" in shown and not shown.startswith("the quick")  # scrolled to the cursor
        await pilot.press("home")
        await pilot.pause()
        assert box.render_line(0).text.startswith("the quick brown fox")


async def test_ab_screen_between_two_models_says_so_and_withholds_the_k_advisor() -> None:
    from mtpwatch.commands.options import free_port
    from mtpwatch.config import DisplaySettings, ServerSpec
    from mtpwatch.session.views import Answer, PromptSummary
    from mtpwatch.session.watch import ServerFeed
    from mtpwatch.ui.app import make_app
    from tests.ui import samples

    app = make_app(samples.config("ab"), autostart=False)
    async with app.run_test(size=(200, 50)) as pilot:
        await samples.load(app, "ab")
        screen = monitor_of(app.screen)
        screen.ab.speedups.clear()
        models = ("google/gemma-4-26B-A4B-it", "google/gemma-4-E4B-it")
        feeds = [
            ServerFeed(
                ServerSpec(label=name, url=f"http://127.0.0.1:{free_port()}", model=model), DisplaySettings()
            )
            for name, model in zip("AB", models, strict=True)
        ]
        screen.feeds[:] = feeds  # not started: only their models are read
        a = Answer(PromptSummary(tokens=300, ttft_s=0.1, decode_tok_s=40.0))
        b = Answer(PromptSummary(tokens=300, ttft_s=0.1, decode_tok_s=4.0))
        screen.ab.show_comparison(a, b)
        await pilot.pause()
        line = " ".join(str(screen.query_one("#speedup").render()).split())
        assert "A serves google/gemma-4-26B-A4B-it and B serves google/gemma-4-E4B-it" in line
        assert "compares two models" in line and MTP_SLOWER not in line and "k advisor" not in line
        for feed in feeds:
            await feed.close()


async def test_a_taller_answer_pane_keeps_the_tail_at_the_bottom() -> None:
    """A row above the pane going away (the 80×24 A/B lines) makes it taller at the same width: the
    answer's last line returns to the bottom row, whether the layout lands before or after the
    answer's last flush (a snapshot under load showed it one row up)."""
    from textual.app import App, ComposeResult

    from mtpwatch.ui.widgets.token_stream import TokenStream

    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield TokenStream()

    app = Host()
    async with app.run_test(size=(60, 10)) as pilot:
        stream = app.query_one(TokenStream)
        stream.styles.height = 6
        await pilot.pause()
        stream.start_block("▶ prompt")
        stream.feed(" ".join(f"word{i}" for i in range(200)))
        stream.finish()
        assert stream.top == len(stream.lines) - 6
        stream.styles.height = 9
        await pilot.pause()
        assert stream.content_region.height == 9
        assert stream.top == len(stream.lines) - 9  # the last line on the bottom row, no blank below
