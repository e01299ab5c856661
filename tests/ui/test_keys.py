"""The help's key tables are made from the bindings: every key a screen binds is listed, as bound."""

from __future__ import annotations

from textual.binding import Binding

from mtpwatch.ui.app import MtpWatchApp
from mtpwatch.ui.screens.fleet import FLEET_HELP, FleetScreen
from mtpwatch.ui.screens.keys import MONITOR_HELP, PLAYER_HELP, PLAYER_KEYS, binding_keys, key_name, key_table
from mtpwatch.ui.screens.monitor import MonitorScreen
from mtpwatch.ui.widgets.fleet_table import LineTable
from mtpwatch.ui.widgets.prompt_input import PromptInput


def _ids(bindings: list[object]) -> set[str]:
    return {b.id for b in bindings if isinstance(b, Binding) and b.id}


def test_every_monitor_fleet_and_player_key_is_in_the_help() -> None:
    listed = {i for ids, _ in MONITOR_HELP for i in ids}
    bound = _ids([*MonitorScreen.BINDINGS, *PromptInput.BINDINGS, *MtpWatchApp.BINDINGS]) | {"palette"}
    assert listed == bound
    listed = {i for ids, _ in FLEET_HELP for i in ids}
    assert listed == _ids([*FleetScreen.BINDINGS, *LineTable.BINDINGS, *MtpWatchApp.BINDINGS]) | {"palette"}
    assert {i for ids, _ in PLAYER_HELP for i in ids} == _ids(list(PLAYER_KEYS))


def test_the_key_column_is_read_from_the_bindings() -> None:
    assert [key_name(k) for k in ("ctrl+q", "f1", "question_mark", "n", "full_stop", "pageup")] == [
        "Ctrl+Q",
        "F1",
        "?",
        "n",
        ".",
        "PgUp",
    ]
    assert binding_keys(Binding("question_mark,f1", "help", id="help")) == "? / F1"
    table = key_table(PLAYER_HELP, PLAYER_KEYS).splitlines()
    assert table[:2] == ["| key | action |", "|---|---|"]
    assert "| ← / → | back / forward 10 s |" in table
    assert "| + / = / - | faster / slower (¼× … 16×) |" in table
