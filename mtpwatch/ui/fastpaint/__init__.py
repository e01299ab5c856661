"""The fast paint: every use of a private Textual name in mtpwatch, behind one gate.

Textual repaints a partial update by rendering whole widgets, refreshes a widget whole when a line
of it changed, styles every row of a widget that has nothing to style, and reaches the terminal
through four hops of its message loop. The fast paint narrows each of these (docs/cost.md, "The
fast paint"): `compositor` (RowCompositor: a partial update renders only the rows it writes),
`frame` (`frame_now`: a streamed burst composed and written at once), `plain` (PlainLines: rows
without the styling pass) and `rows` (RowRefresh: a refresh narrowed to the rows that changed).
They read or override Textual's private internals, so they run only where `gate` says so:

- on the Textual releases they were checked against (`VERIFIED_TEXTUAL`),
- unless the environment sets `MTPWATCH_FASTPAINT=0`,
- and only if the private names import (inside `try/except`: a Textual that lacks one falls back).

Off, every widget and screen behaves as plain Textual: the same screens, drawn more slowly
(tests/ui/test_fast_paint_off.py compares them with the same SVGs). The gate is read each time
a screen is built, so a test can switch it with the environment. Outside this package no module
of mtpwatch names a Textual private (tests/test_fast_paint_boundary.py).

`driver` (HangupDriver) lives here for that rule too, though it is no speed-up and not gated: it
ends the app when its terminal goes away, where Textual 8.2.8's writer thread would block the loop
(issue 40). Where its private names do not import, the app runs on Textual's own driver
(`ui/app.py`).
"""
