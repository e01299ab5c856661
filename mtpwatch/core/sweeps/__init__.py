"""Sweeps over k and over context length, and the k advisor that reads them.

Owns: the k sweep (`sweep`), one `bench --start` sweep end to end (`kscan`), the advisor's
predictions (`advisor`, pure), when the data names a best k (`resolve`), the per-concurrency
schedule (`schedule`), what the engine really runs and which advice holds under it (`engine`),
step times from `vllm bench forward` (`forward`), the "speculation on, k=0" arm (`idle`) and the
context-length sweep (`context`).
May import: `mtpwatch.core.ab`, `mtpwatch.core.reports` and what they may import.
"""
