"""The A/B run and its statistics: paired runs of two arms, and the report they make.

Owns: prompt sets and loaders (`workloads`), paired statistics (`stats`), what an arm is (`arms`),
the plan (`plan`), per-run records (`records`), progress events (`events`), the runner (`runner`),
the per-run log (`runlog`), one bench run with its provenance and signals (`run`), the bench's
options in one object (`options`), the lossless check (`lossless`), latency percentiles
(`latency`), the report (`report`) and the arms that talk HTTP to a server (`http_arm`).
May import: `mtpwatch.core.metrics`, `mtpwatch.core.http`, `mtpwatch.core.launch`, `mtpwatch.core.jsonout`.
The k sweep and its advisor live in `mtpwatch.core.sweeps`; saved reports in `mtpwatch.core.reports`.
"""
