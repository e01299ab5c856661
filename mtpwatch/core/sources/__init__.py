"""Where fleet numbers come from besides direct `/metrics` scrapes.

Owns: reading the same counters from a Prometheus server through its HTTP API (`prometheus`; one
target's counters for the monitor: `prometheus_target`), and how windows and freshness fit the store
(`prometheus_fit`: Prometheus or VictoriaMetrics).
May import: the standard library, httpx and `mtpwatch.core.{metrics, fleet, jsonout}`.
"""
