"""The vLLM simulator: a real HTTP server on loopback that speaks vLLM 0.32's formats."""

METRICS_FILTER_MODES = ("honour", "ignore", "empty", "404", "redirect")
"""How the simulator answers `/metrics/?name[]=…` (`faults.Faults.metrics_filter`, `--fault-metrics-filter`):
as vLLM 0.32 (honour), or as a server whose filter cannot be trusted, for the fallback's tests."""
