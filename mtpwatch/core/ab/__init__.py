"""The A/B engine: paired runs of two arms, their statistics, and the report.

Owns: prompt sets and loaders (`workloads`), paired statistics (`stats`), what an arm is (`arms`),
the plan (`plan`), per-run records (`records`), progress events (`events`), the runner (`runner`),
the lossless check (`lossless`), the report (`report`) and the arms that talk HTTP to a server
(`http_arm`), the k advisor (`advisor`, pure) and the k sweep (`sweep`).
May import: `mtpwatch.core.metrics`, `mtpwatch.core.http`, `mtpwatch.core.launch`, `mtpwatch.core.jsonout`.
"""
