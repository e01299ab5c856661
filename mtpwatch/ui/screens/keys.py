"""Keys: the bindings every screen shares, the replay player's, and the help's key tables made from them.

A screen owns its keys: its `BINDINGS` (each with an id) and, for the help, one row per key or pair
of keys (`HelpRow`). `key_table` writes the help's Markdown table from the bindings themselves (the
screen's, its widgets' and `app_keys`), so a key the help lists is the key that is bound: the
monitor's (`MONITOR_HELP`) and the fleet's (`screens/fleet.FLEET_HELP`). The replay player's keys
live here: every monitor's help documents them, and `screens/replay.py` imports the monitor.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from textual.app import App
from textual.binding import Binding, BindingType
from textual.keys import format_key

from mtpwatch.ui.widgets.prompt_input import PromptInput

HelpRow = tuple[tuple[str, ...], str]
"""One row of a help table: the ids of the bindings it names (their keys, joined by " / "), its words."""

HELP = Binding(
    "question_mark,f1",
    "app.help",
    "Help",
    key_display="?/F1",
    tooltip="What every number means (? with an empty prompt, or F1).",
    id="help",
)
"""The help, on every screen (the app's binding; the monitor lists it first, as its footer does)."""

PAUSE = Binding(
    "f2", "app.toggle_pause", "Pause", tooltip="Freeze the display; collection continues.", id="pause"
)
"""The display's pause, on every screen (`MtpWatchApp.paused`)."""

MONITOR_KEYS = [
    Binding(
        "f3", "cycle_window", "Window", tooltip="Acceptance window: 10 s, 60 s, this prompt.", id="window"
    ),
    Binding("f4", "sample_prompt", "Sample", tooltip="Send a sample prompt to every server.", id="sample"),
    Binding("f5", "clear_answers", "Clear", tooltip="Clear the answer panes.", id="clear"),
    Binding(
        "f6",
        "measure",
        "Measure",
        tooltip="A/B: run the last prompt N times per arm (paired runs, median speed-up, 95 % CI).",
        id="measure",
    ),
    Binding("escape", "cancel", "Cancel", tooltip="Cancel the running generation.", id="cancel"),
    Binding(
        "ctrl+s",
        "save_results",
        "Save",
        show=False,
        tooltip="Save the last F6 measurement as a bench report (JSON).",
        id="save",
    ),
    Binding("pageup", "scroll_answers(-1)", "Scroll back", show=False, id="answers-page-up"),
    Binding("pagedown", "scroll_answers(1)", "Scroll forward", show=False, id="answers-page-down"),
]
"""The monitor's own keys (`MonitorScreen.BINDINGS`, after the app's Quit, Help and Pause). Function keys:
the prompt Input has focus and swallows printable keys."""

MONITOR_HELP: tuple[HelpRow, ...] = (
    (("send",), "send the prompt (to every server)"),
    (("history-previous", "history-next"), "prompt history"),
    (("cancel",), "cancel the running generation (the partial answer stays, marked cancelled)"),
    (
        ("answers-page-up", "answers-page-down"),
        "scroll the answers back / forward (the end follows new text again)",
    ),
    (
        ("help",),
        "this help — `?` works while the prompt box is empty or holds the suggested prompt (F1 is taken"
        " by VS Code Remote terminals); Esc closes it",
    ),
    (("pause",), "pause the display (collection continues; numbers jump on resume)"),
    (("window",), "cycle the acceptance window"),
    (("sample",), "send a sample prompt"),
    (("clear",), "clear the answers"),
    (("measure",), "A/B: measure the last prompt, N paired runs per arm (median speed-up, 95 % CI)"),
    (("save",), "save the last F6 measurement as a bench report (JSON; `--save FILE` names it)"),
    (("screenshot",), "save a screenshot of the screen (SVG)"),
    (("palette",), "command palette"),
    (("quit", "quit-ctrl-c"), "quit (stops servers mtpwatch started), on every screen"),
)


QUIT = Binding(
    "ctrl+q", "app.quit", "Quit", tooltip="Quit; stops servers mtpwatch started.", id="quit", priority=True
)
"""Quit, on every screen. The app's first key (Textual's own App binds ctrl+q first), so the footer
shows it first: a screen with keys of its own lists it first too (`MonitorScreen.BINDINGS`)."""

# Ctrl+C quits too, on every screen: what a terminal user reaches for first. Priority, so the prompt
# Input's and the Screen's Ctrl+C (copy selected text) do not swallow it; Textual keeps super+c for
# copying, and the terminal's own selection copies with the mouse.
QUIT_CTRL_C = Binding(
    "ctrl+c",
    "app.quit",
    "Quit",
    show=False,
    tooltip="Quit, as Ctrl+Q does; stops servers mtpwatch started.",
    id="quit-ctrl-c",
    priority=True,
)

# priority: no widget (an answer pane that scrolls) may take the player's keys. None in the
# footer: the console's row lists them at every width (four here cut the footer at 80 columns).
PLAYER_KEYS = [
    Binding("space", "play_pause", "Play/pause", show=False, id="replay-play", priority=True),
    Binding("left", "seek(-10)", "−10 s", show=False, id="replay-back", priority=True),
    Binding("right", "seek(10)", "+10 s", show=False, id="replay-forward", priority=True),
    Binding("n", "jump(1)", "Next prompt", show=False, id="replay-next", priority=True),
    Binding("p", "jump(-1)", "Prev prompt", show=False, id="replay-previous", priority=True),
    Binding("full_stop", "step", "Step", show=False, id="replay-step", priority=True),
    Binding("plus,equals_sign", "speed(1)", "Faster", show=False, id="replay-faster", priority=True),
    Binding("minus", "speed(-1)", "Slower", show=False, id="replay-slower", priority=True),
    Binding("home", "restart", "Start", show=False, id="replay-start", priority=True),
]
"""The replay player's keys (`screens/replay.ReplayScreen`)."""

PLAYER_HELP: tuple[HelpRow, ...] = (
    (("replay-play",), "play / pause"),
    (("replay-back", "replay-forward"), "back / forward 10 s"),
    (("replay-next", "replay-previous"), "next / previous prompt"),
    (("replay-step",), "step to the next scrape (pauses)"),
    (("replay-faster", "replay-slower"), "faster / slower (¼× … 16×)"),
    (("replay-start",), "back to the start"),
)

_NAMES = {"escape": "Escape", "enter": "Enter", "pageup": "PgUp", "pagedown": "PgDn"}
"""Keys the help names in words where Textual's footer writes `esc`, `⏎`, `pgup`, `pgdn`."""


def key_name(key: str) -> str:
    """One key as the help writes it: 'ctrl+q' → 'Ctrl+Q', 'f1' → 'F1', 'question_mark' → '?', 'n' → 'n'
    (a character or arrow as Textual's `format_key` draws it, a word capitalised)."""
    *mods, last = key.split("+")
    name = _NAMES.get(last) or format_key(last)
    if name == last and (mods or len(name) > 1):
        name = name.capitalize()
    return "+".join([*(m.capitalize() for m in mods), name])


def binding_keys(binding: Binding) -> str:
    """Every key of `binding`, as the help writes them ('? / F1')."""
    return " / ".join(key_name(k.strip()) for k in binding.key.split(","))


def key_table(rows: Sequence[HelpRow], bindings: Iterable[BindingType]) -> str:
    """The help's Markdown table of `rows`, each key column read from the bindings the row names
    (KeyError for an id no binding has: the help never names a key that is not bound)."""
    by_id = {b.id: b for b in bindings if isinstance(b, Binding) and b.id}
    lines = ["| key | action |", "|---|---|"]
    lines += [f"| {' / '.join(binding_keys(by_id[i]) for i in ids)} | {words} |" for ids, words in rows]
    return "\n".join(lines)


def app_keys(app: App[Any]) -> list[BindingType]:
    """The keys of every screen: the app's bindings and its command palette's."""
    return [*app.BINDINGS, Binding(app.COMMAND_PALETTE_BINDING, "command_palette", "Palette", id="palette")]


def monitor_help_text(bound: Iterable[BindingType]) -> str:
    """A monitor's help: every number, its key table read from `bound` (the screen's and `app_keys`)
    and the prompt box's, and the replay player's."""
    from mtpwatch.ui.screens.help import HELP_TEXT, METHOD_NAMES  # the help loads when asked for

    keys = key_table(MONITOR_HELP, [*bound, *PromptInput.BINDINGS])
    player = key_table(PLAYER_HELP, PLAYER_KEYS)
    return f"{HELP_TEXT}## Keys\n\n{keys}\n\n{METHOD_NAMES}## Replay (`mtpwatch replay FILE`)\n\n{player}\n"
