"""Whether the fast paint is on: the installed Textual, the `MTPWATCH_FASTPAINT` switch, and whether
Textual's private names import. Imports no private Textual name itself (the probe does, guarded)."""

from __future__ import annotations

import functools
import importlib
import os
from dataclasses import dataclass
from pathlib import Path

ENV = "MTPWATCH_FASTPAINT"
"""`MTPWATCH_FASTPAINT=0` turns the fast paint off (plain Textual), whatever the release."""

# The Textual releases whose private internals (`_compositor`'s `_regions_to_spans`, `cuts`,
# `visible_widgets`, `ChopsUpdate`; the widget's dirty regions, caches and border labels; the
# app's batch count) the fast paint was checked against: tests/ui/test_compositor.py and
# test_plain_lines.py run on the exact Textual that [test] pins. Any other release gets Textual's
# own paint: slower partial updates, never a broken screen.
VERIFIED_TEXTUAL = frozenset({"8.2.8"})

# The modules holding the private imports: the gate imports them, inside `try/except`, only once
# the release and the switch allow it.
_PRIVATE_MODULES = ("mtpwatch.ui.fastpaint.compositor",)


@dataclass(frozen=True)
class Gate:
    """The fast paint's state: `on`, the installed Textual, and why (`words`)."""

    on: bool
    textual: str
    reason: str

    def words(self) -> str:
        """`fast paint: on (Textual 8.2.8)`, `fast paint: off (MTPWATCH_FASTPAINT=0)`, ..."""
        return f"fast paint: {'on' if self.on else 'off'} ({self.reason})"


@functools.cache
def installed_textual() -> str:
    """The installed Textual's version ("" when it is not installed as a distribution), read from the
    one `textual-*.dist-info/METADATA` beside the package: importing `importlib.metadata` costs the
    first frame ~12 ms (`python -X importtime`). Anything else (no dist-info there, or several) asks
    `importlib.metadata`, which tests/test_fast_paint_boundary.py checks this against."""
    import textual

    found = list(Path(textual.__file__).resolve().parent.parent.glob("textual-*.dist-info/METADATA"))
    if len(found) == 1:
        with found[0].open(encoding="utf-8") as meta:
            for line in meta:
                if line.startswith("Version:"):
                    return line.partition(":")[2].strip()
                if not line.strip():  # the headers end here
                    break
    return _metadata_version()


def _metadata_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("textual")
    except PackageNotFoundError:
        return ""


def gate(textual_version: str | None = None) -> Gate:
    """The gate now: read from the environment on each call (a screen reads it when built), for
    the installed Textual or `textual_version`."""
    textual = installed_textual() if textual_version is None else textual_version
    return _gate(os.environ.get(ENV, "").strip(), textual)


@functools.cache
def _gate(switch: str, textual: str) -> Gate:
    if switch == "0":
        return Gate(False, textual, f"{ENV}=0")
    if textual not in VERIFIED_TEXTUAL:
        return Gate(False, textual, f"Textual {textual or '?'} is not a checked release")
    try:
        for module in _PRIVATE_MODULES:
            importlib.import_module(module)
    except (ImportError, AttributeError) as error:  # a private name this Textual lacks
        return Gate(False, textual, f"Textual {textual} lacks a private name: {error}")
    return Gate(True, textual, f"Textual {textual}")
