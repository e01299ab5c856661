"""The headless half of the app: what one session watches, without a terminal.

Owns the sources of pages and streams behind one protocol (`sources.Source`: live HTTP through
`watch.ServerFeed`, Prometheus through `prometheus`, a recording through `replay.ReplaySource`),
the server watch (`watch`: scrape → snapshot → collector → rates), launching a server and following
its log (`launching`), the prompt window and answers (`prompts`, `answers`), the frozen view models
and their pure builder (`views`), the observers a feed notifies (`observers`) and the recorder that
is one (`recording`), the roofline's inputs (`bandwidth_inputs`), the A/B measurement (`measure`),
its report file (`results`), the k advisor (`advice`), the console's A/B speed-ups (`speedups`),
what stands behind a monitor screen (`drivers`, `replay_driver`) and the self-running demo (`demo_loop`).

Everything here is plain data and plain text: `mtpwatch.ui.markup` alone turns it into markup.

May import `mtpwatch.core` and `mtpwatch.config`; never Textual, Rich, `mtpwatch.ui`,
`mtpwatch.commands`, `mtpwatch.sim` or `mtpwatch.cli` (an import-linter contract).
"""
