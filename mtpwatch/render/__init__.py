"""Text renderers of core's results (the one number formatter, the text tables, the charts): what a
command prints, as plain strings (SVG through Rich for `plot --svg`). Imports only `mtpwatch.core`,
the standard library, plotext and Rich (an import-linter contract in pyproject.toml); the TUI's
markup renderers live in `mtpwatch/ui/`.
"""
