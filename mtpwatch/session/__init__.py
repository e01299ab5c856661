"""The headless half of the app: what one session watches, without a terminal.

The source behind each panel (`sources.Source`; `watch.ServerFeed` is the one implementation), where
its pages come from, its server watch and view models, launching a server, the console's prompts,
recording and replay, the A/B measurement and the k advisor: module by module in
docs/architecture.md. Everything here is plain data and plain text: `mtpwatch.ui.markup` alone turns
it into markup.

May import `mtpwatch.core` and `mtpwatch.config`; never Textual, Rich, `mtpwatch.ui`,
`mtpwatch.commands`, `mtpwatch.sim` or `mtpwatch.cli` (an import-linter contract).
"""
