"""The fast paint: every use of a private Textual name in mtpwatch, behind one gate (docs/cost.md,
"The fast paint"): `compositor` (RowCompositor: a partial update renders only the rows it writes),
`frame` (`frame_now`: a streamed burst composed and written at once), `plain` (PlainLines: rows
without the styling pass) and `rows` (RowRefresh: a refresh narrowed to the rows that changed). They
run only where `gate` says so.

Off, every widget and screen behaves as plain Textual: the same screens, drawn more slowly
(tests/ui/test_fast_paint_off.py compares them with the same SVGs). Outside this package no module
of mtpwatch names a Textual private (tests/test_fast_paint_boundary.py).

`driver` (HangupDriver) lives here for that rule too, though it is no speed-up and not gated: it
ends the app when its terminal goes away (issue 40); where its private names do not import, the
app runs on Textual's own driver (`ui/app.py`).
"""
