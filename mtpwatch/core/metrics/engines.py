"""Which engine a metrics page comes from, and what that engine does not export.

vLLM writes `vllm:` families; llama.cpp's llama-server writes the same counters under `llamacpp:`
but no latency histograms and no KV gauge. The snapshot report, the monitor and the fleet say so
with these words instead of showing zeros.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

Engine = Literal["vllm", "llama.cpp", "unknown"]

ENGINE_NOTES: Mapping[str, Mapping[str, str]] = MappingProxyType(
    {
        "llama.cpp": MappingProxyType(
            {
                "latency": "n/a: llama-server exports no TTFT/ITL/TPOT histograms",
                "kv": "n/a: llama-server exports no KV-cache gauge",
                "counts": "llama-server adds a request's counts when the request finishes",
            }
        ),
    }
)
"""Why a number is missing on an engine (key: 'latency', 'kv', 'counts'); vLLM has no entries."""


_ENGINES: dict[str, Engine] = {"vllm": "vllm", "llamacpp": "llama.cpp"}


def engine_of_schema(schema: str) -> Engine:
    """The engine a metrics schema ("vllm", "llamacpp", "none") comes from."""
    return _ENGINES.get(schema, "unknown")
