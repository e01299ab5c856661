"""Many servers at once: one row per server and engine, the outlier rule, and the concurrent scraper.

Owns: `FleetRow` (what a fleet view and every fleet `--json` show per server and engine) and how a
`/metrics` page splits into one snapshot per (model, engine) (`rows`); the outlier rule and its
words for the help screen (`outliers`); the bounded, per-server-backoff scraper that keeps one
collector per row (`scraper`); the fleet by group (`groups`) and its JSON document (`report`).
May import: the standard library, `mtpwatch.core.metrics` (snapshots, rates: vLLM's formulas are
used from there, never re-derived), `mtpwatch.core.http` (the HTTP client and its backoff) and
`mtpwatch.core.jsonout`.
Never Textual or Rich; the Prometheus source (`core.sources`) builds rows with `rows` too.
"""
