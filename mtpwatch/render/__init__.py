"""Text renderers of core's results: the one number formatter, the text tables, the charts.

What a command prints and a chart draws, as plain strings (and SVG through Rich for `plot --svg`).
May import `mtpwatch.core`, the standard library, plotext and Rich; never Textual, `mtpwatch.ui`,
`mtpwatch.commands` or `mtpwatch.sim` (an import-linter contract in pyproject.toml). The TUI's
markup renderers live in `mtpwatch/ui/`.
"""
