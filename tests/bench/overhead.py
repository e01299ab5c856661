"""mtpwatch's overhead benchmark: prints one JSON object (figures, not pass/fail).

    .venv/bin/python tests/bench/overhead.py

- parse_ms: the fast /metrics parser on the real 54 KB vLLM page (median of many runs); target ≤ 1 ms.
- prometheus_client_parse_ms: the same page through prometheus_client's full parser, for scale.
- cpu_percent: the app attached to two simulated servers scraped at 4 Hz while 2,000 tok/s stream,
  as % of one core; target ≤ 3 %.
- cpu_percent_streamed_tok_s: the token rate that scenario reached (the simulators' own counters).
- idle_cpu_percent: the app watching one idle server at 4 Hz (no prompt streaming).
- first_frame_s: launch to first painted frame; target ≤ 0.5 s.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from overhead_app import measure_first_frame_s, measure_idle_cpu_percent, measure_streaming
from overhead_parse import measure_parse


def main() -> None:
    """Measure every figure and print them as one JSON object."""
    figures: dict[str, object] = {}
    figures.update(measure_parse())
    figures["first_frame_s"] = measure_first_frame_s()
    cpu, tok_s = measure_streaming()
    figures["cpu_percent"] = cpu
    figures["cpu_percent_streamed_tok_s"] = tok_s
    figures["idle_cpu_percent"] = measure_idle_cpu_percent()
    figures["targets"] = {"parse_ms": 1.0, "cpu_percent": 3.0, "first_frame_s": 0.5}
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
