"""Talking to a server over HTTP: scrapes, models, and the streamed token answer.

Owns: one-line error classes (`errors`), URL normalising (`urls`), backoff and connection state
(`backoff`), the client (`client`), the SSE decoder (`sse`), the plain-http fast stream path
(`faststream`) and the client-side per-request numbers (`generation`).
May import: `mtpwatch.core.metrics`, httpx, the standard library.
"""
