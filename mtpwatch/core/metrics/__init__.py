"""What a `/metrics` page says, and what it means over a window.

Owns: the fast exposition-format parser (`parse`), one page → one `MetricsSnapshot` (`snapshot`),
vLLM's formulas written once with the source they follow (`formulas`), deltas, windows, restarts and
attribution (`rates`), which acceptance a prompt gets (`attribution`), and the `snapshot --json`
report (`report`).
May import: the standard library. Nothing else in mtpwatch: every other part of the core builds on
this one.
"""
