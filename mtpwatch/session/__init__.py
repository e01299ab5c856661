"""The headless half of the app: what one session watches, without a terminal.

Owns the source behind each panel (`sources.Source`, ten members; `watch.ServerFeed`, a thin
assembly, is the one implementation), where its pages come from (`scrapes.Scrapes`: live HTTP in
`scrapes`, Prometheus in `prometheus`, a recording in `replay`), the server watch
(`server_watch.ServerWatch`: scrape → snapshot → collector; status, backoff, identity; the NVML
reading shown, `server_watch.Hardware`), the view built from it (`server_view.build_server_view`,
pure), launching a server and following its log (`launching`), the prompt window and answers
(`prompts`, `answers`), the frozen view models (`views`), the observers a feed notifies
(`observers`) and the recorder that is one (`recording`), the roofline's inputs
(`bandwidth_inputs`), the A/B measurement (`measure`), its report file (`results`), the k advisor
(`advice`), the console's A/B speed-ups (`speedups`), what stands behind a monitor screen
(`drivers`, `replay_driver`) and the self-running demo (`demo_loop`).

Everything here is plain data and plain text: `mtpwatch.ui.markup` alone turns it into markup.

May import `mtpwatch.core` and `mtpwatch.config`; never Textual, Rich, `mtpwatch.ui`,
`mtpwatch.commands`, `mtpwatch.sim` or `mtpwatch.cli` (an import-linter contract).
"""
