"""Where fleet numbers come from besides direct `/metrics` scrapes.

Owns: reading the same counters from a Prometheus server through its HTTP API (`prometheus`).
May import: the standard library, httpx, `mtpwatch.core.metrics` and `mtpwatch.core.fleet`.
"""
