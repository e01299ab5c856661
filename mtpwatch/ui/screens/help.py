# ruff: noqa: E501
"""HelpScreen: every number on screen, its formula and its source."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from mtpwatch.ui.fastpaint.gate import ENV, gate

HELP_TEXT = """\
# mtpwatch — what every number means

**Esc** (or `q`, `?`, F1) closes this help.

Numbers come from two places, and each is labelled with its source and window:

* **server** — deltas of vLLM's Prometheus counters on `/metrics`, scraped every
  `--interval` seconds (2 Hz by default). They count **every request** the engine ran in
  the window ("engine-wide"), unless only the console's prompt ran ("this request":
  `requests_running ≤ 1` at every scrape of the prompt's window).
* **client** — timestamps of the streamed answer as it arrives at mtpwatch.

Windows: **10 s**, **60 s** or **this prompt** (from the prompt's start to the scrape after its
last token); `F3` cycles them.

| number | formula | source |
|---|---|---|
| acceptance rate | Δ`spec_decode_num_accepted_tokens` / Δ`spec_decode_num_draft_tokens` | server |
| mean acceptance length | 1 + Δ`accepted_tokens` / Δ`spec_decode_num_drafts` (includes the bonus token, 1 … k+1) | server |
| per-position, marginal (bar) | Δ`accepted_tokens_per_pos{position=i}` / Δ`num_drafts` = P(first i+1 drafts accepted) | server |
| per-position, conditional | Δ`per_pos[i]` / Δ`per_pos[i−1]` = P(position i accepted given i−1 was) | server |
| drafted on … % of steps | Δ`spec_decode_num_drafts` / Δ`inter_token_latency_seconds_count`: both count once per request per engine step, so this is the share of decode steps that verified drafts (vLLM 0.34 scheduler.py:2396-2417, stats.py:555-560). Shown when the command line set `num_speculative_tokens_per_batch_size` (k follows the batch size, prefills counted) or the share is below 99 % (a k=0 range; ngram without a match). When draft lengths mix (two ks above 0, or Δdraft_tokens / Δdrafts < k) the per-position bars say so: their denominator Δ`num_drafts` counts drafts too short to reach a late position, which reads low | server |
| server tok/s | Δ`generation_tokens_total` / Δt (all requests) | server |
| TTFT | Δ`time_to_first_token_seconds` sum / count | server |
| TPOT (per token) | Δ`request_time_per_output_token_seconds` sum / count (finished requests) | server |
| ITL (per step) | Δ`inter_token_latency_seconds` sum / count — **per engine step, not per token** under speculation | server |
| KV cache | `kv_cache_usage_perc`, now | server |
| running / waiting | `num_requests_running` / `num_requests_waiting`, now | server |
| client TTFT | first token time − request sent | client |
| decode tok/s | (tokens − 1) / (t_last − t_first) | client |
| speed-up B/A | decode tok/s of B / decode tok/s of A, last prompt and median | client |
| effective GB/s | analytic bytes per verify step (weights + drafter + KV) × verify steps/s while decoding (1 / mean ITL, so idle seconds in the window do not count) | analytic |
| % of peak | effective GB/s / peak GB/s of the GPU (table, `--gpu`, `--peak-gbps`); past 100 % it says why (a simulated clock, else a wrong config or peak) | analytic |
| ceiling tok/s | peak GB/s / bytes per step × tokens per step (1 baseline, mean acceptance length with spec) | analytic |
| now … % of it | tok/s while decoding (Δgeneration_tokens / ΔITL sum) / the ceiling that applies (MTP ceiling when k > 0) | server + analytic |
| speed-up terms | acceptance 1 + α·k (= τ) · bandwidth (MTP ceiling / baseline ceiling: drafter passes and MoE expert union priced in) · compute (needs the GPU's FLOP rate); the smallest binds and is highlighted | analytic |
| KV context | `kv_cache_usage` × `num_gpu_blocks` × `block_size` (engine-wide), else the last prompt's prompt + generated tokens | server / client |
| hardware | NVML GPM DRAM bandwidth (GB/s, % of peak) and "memory busy %" (time, not bytes) for a GPU on this machine, only while the panel is shown; otherwise the reason (remote server, GB10: analytic only) | hardware |
| verdict | from the window's numbers: acceptance < 5 % over ≥ 50 drafts → mismatched drafter; mean length < 1.2 → barely helps; else the MTP ceiling vs the baseline's; in A/B, MTP slower than the baseline on the last prompts is flagged | server + analytic |

A ≈ before a token count means the server sent no per-chunk usage, so tokens were
counted from chunks. "speculation off" means the server exports no spec-decode counters.
If every `vllm:` family is missing, the server runs with `--disable-log-stats`.
Bandwidth needs the model's `config.json`: pass `--model-config PATH` (and `--gpu NAME`
or `--peak-gbps X` when the server is remote).

**Simulated ×N clock**: `mtpwatch sim --speed N` runs the simulator's clock N times faster than
the GPU it models (its `/sim/info` says so; a real vLLM has no such page), so its tok/s, % of peak
and % of the ceiling are N times what the hardware allows — `BW 601 % of 273 GB/s` at
`--speed 10`. Panels mark it `sim ×N clock`; the ratios (speed-up, acceptance) are unaffected.

## A/B

`alternate` (default) sends a prompt to A, then B, never both at once, in ABBA order
across prompts. `race` sends both at once: contended — not a measurement. At temperature
0 the lossless line says whether both outputs are identical, or where they first diverge.

Panes narrower than a line take shorter words (`accept`, `len`; the roofline names the GPU and
its peak first, and "bandwidth-bound" or "overhead-bound" stands for its summary), then wrap
between labelled parts: no label is cut. When a pane's answer would keep fewer than 6 rows,
its blocks give their rows to the answer, one at a time while it still would: the roofline
(160×40; `BW … % of … GB/s` stays in the numbers, marked "roofline hidden: too few rows"), the
tok/s chart (120×40; the tok/s stay in the numbers), then the bars, with the compact numbers (`pos`
keeps every position). Stacked panes (below 120 columns) give up the verdict.

"""

METHOD_NAMES = """\
## Method names

The header says what speculates: `MTP k=2`, `ngram k=4`, `EAGLE-3 k=3` when the method is known
(the log of a server mtpwatch started, the simulator, `--spec-method`), and `speculative k=4`
when it is not — the counters alone do not say which method drafted.

"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,f1,question_mark", "dismiss", "Close help", id="close-help")]

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        drawing = (  # whether the fast paint is on (`ui/fastpaint/gate`), and how to turn it off
            f"{gate().words()}\n\nThe fast paint draws a streamed answer's rows without Textual's full repaint."
            f" It runs on the Textual releases it was checked against; `{ENV}=0` turns it off (the same"
            " screens, at a higher CPU cost: docs/cost.md)."
        )
        with VerticalScroll(id="help-body"):
            yield Markdown(f"{self.text}\n\n## Drawing\n\n{drawing}\n")

    def on_mount(self) -> None:
        # No scrollbar (its thumb's ends are drawn in block glyphs, ▂▂ and ▅▅, read as stray marks
        # in the margin): the bottom border says where the reader is and how to move.
        body = self.query_one("#help-body", VerticalScroll)
        self.watch(body, "scroll_y", lambda _: self._show_position(body))
        self.watch(body, "virtual_size", lambda _: self._show_position(body))

    def _show_position(self, body: VerticalScroll) -> None:
        rows, height = body.virtual_size.height, body.scrollable_content_region.height
        if not rows or not height or rows <= height:
            body.border_subtitle = ""
            return
        first = round(body.scroll_y) + 1
        last = min(first + height - 1, rows)
        body.border_subtitle = f"lines {first}–{last} of {rows} · ↑/↓ PgUp/PgDn scroll"
