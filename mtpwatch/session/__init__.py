"""The headless half of the app: what one session watches, without a terminal.

Module by module in docs/architecture.md. Everything here is plain data and plain text:
`mtpwatch.ui.markup` alone turns it into markup (and escapes it).

May import `mtpwatch.core` and `mtpwatch.config`; never Textual, Rich, `mtpwatch.ui`,
`mtpwatch.commands`, `mtpwatch.sim` or `mtpwatch.cli` (an import-linter contract).
"""
