"""Parse overhead on the real 54 KB vLLM page: the fast parser against prometheus_client's full parser.

    .venv/bin/python tests/bench/overhead_parse.py

Figures (median milliseconds per page, `time.perf_counter`):
- parse_ms: `parse_samples` (every `vllm:`/`llamacpp:` line), warm label cache as in a running app.
- parse_cold_ms: the same with the label/name caches emptied before each run (the first scrape).
- snapshot_ms: `parse_snapshot`, what the app runs per scrape (only the families it shows, then the
  snapshot itself).
- prometheus_client_parse_ms: `text_string_to_metric_families` over the whole page, every sample read.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "tests" / "data" / "metrics-ngram-k4-after.txt"


def _median_ms(fn: Callable[[], object], repeat: int, before: Callable[[], None] | None = None) -> float:
    times: list[float] = []
    for _ in range(repeat):
        if before is not None:
            before()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000.0


def measure_parse(repeat: int = 300, reference_repeat: int = 30) -> dict[str, float]:
    """Median milliseconds per page for the fast paths and for prometheus_client's full parse."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from prometheus_client.parser import text_string_to_metric_families

    from mtpwatch.core.metrics import parse as promparse
    from mtpwatch.core.metrics.snapshot import parse_snapshot

    text = PAGE.read_text(encoding="utf-8")

    def full_parse() -> None:
        for family in text_string_to_metric_families(text):
            for _ in family.samples:
                pass

    def clear_caches() -> None:
        promparse._LABEL_CACHE.clear()
        promparse._NAME_CACHE.clear()

    promparse.parse_samples(text)  # warm the caches as a running app would have them
    return {
        "parse_ms": round(_median_ms(lambda: promparse.parse_samples(text), repeat), 4),
        "parse_cold_ms": round(
            _median_ms(lambda: promparse.parse_samples(text), repeat // 3, clear_caches), 4
        ),
        "snapshot_ms": round(_median_ms(lambda: parse_snapshot(text), repeat), 4),
        "prometheus_client_parse_ms": round(_median_ms(full_parse, reference_repeat), 4),
        "page_bytes": float(len(text.encode("utf-8"))),
    }


if __name__ == "__main__":
    print(json.dumps(measure_parse(), indent=2))
