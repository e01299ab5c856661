"""mtpwatch's overhead benchmark: prints one JSON object (figures, not pass/fail).

    .venv/bin/python tests/bench/overhead.py

- parse_ms: the fast /metrics parser on the real 54 KB vLLM page (median of many runs); target ≤ 1 ms.
- prometheus_client_parse_ms: the same page through prometheus_client's full parser, for scale.
- cpu_percent: the app attached to two simulated servers scraped at 4 Hz while 2,000 tok/s stream,
  as % of one core; target ≤ 3 %.
- cpu_percent_streamed_tok_s: the token rate that scenario reached (the simulators' own counters).
- idle_cpu_percent: the app watching one idle server at 4 Hz (no prompt streaming).
- first_frame_s: launch to first painted frame; target ≤ 0.5 s.
- tty: the real command line on a real pty (watch_cost.py) at the default interval (2 Hz), per
  scenario (`idle`: attach, one idle server, in its first minute; `idle-steady`: the same after a
  minute; `one`: attach, one E4B server streaming ~39 tok/s; `race`: ab --schedule race, two servers
  streaming ≈2,000 tok/s together): cpu_percent, bytes_per_s written to the terminal, tok_s the
  servers generated, latency_ms_p50/p95 from a chunk's socket read to the terminal write of the
  frame holding it.
  Targets: CPU ≤ 1 % idle, ≤ 1.5 % one, ≤ 3 % race; bytes ≤ 1 KB/s idle, ≤ 10 KB/s streaming;
  latency p95 ≤ 50 ms.
- tty_fps8: the `one` scenario again with `--fps 8` (what fewer redraws save).
- tty_floor: the framework's floor on the same pty, measured the same way (floor_app.py: a pane
  growing 15 times a second beside 20 rows changing twice a second; `floor-idle`: the rows only;
  `floor-race`: the race's shape; `floor-cell`, `floor-cell-25`: one number changing 15 or 25 times
  a second, alone): what a minimal Textual app of the monitor's shape costs, and the least any
  Textual app can show at one server's burst rate and at the race's frame rate, beside the app's.
- frame: one frame composed headless (frame_cost.py), the app and the floor app: CPU ms, lines and
  widgets rendered, terminal bytes per frame.
- server_cpu (only with `--vllm-url URL`, a live real vLLM): its API server's CPU per second idle
  and streaming, nobody watching against `mtpwatch attach` on a pty at the default interval
  (server_cpu.py), and what attaching adds; targets ≤ 6 ms/s idle, ≤ 10 ms/s streaming.
  `--vllm-pid` names the API server (default: the process listening on the URL's port).

    .venv/bin/python tests/bench/overhead.py --vllm-url http://127.0.0.1:8000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from frame_cost import measure_app as measure_frame_app
from frame_cost import measure_floor as measure_frame_floor
from overhead_app import measure_first_frame_s, measure_idle_cpu_percent, measure_streaming
from overhead_parse import measure_parse
from server_cpu import TARGETS_MS_PER_S
from server_cpu import measure as measure_server_cpu
from server_cpu import parser as server_cpu_parser
from watch_cost import measure as measure_tty
from watch_cost import parser as tty_parser


def main() -> None:
    """Measure every figure and print them as one JSON object."""
    cli = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    cli.add_argument("--vllm-url", help="a live real vLLM: add its API server's CPU, watched and not")
    cli.add_argument("--vllm-pid", type=int, help="that API server's pid (default: the listener)")
    args = cli.parse_args()
    figures: dict[str, object] = {}
    figures.update(measure_parse())
    figures["first_frame_s"] = measure_first_frame_s()
    cpu, tok_s = measure_streaming()
    figures["cpu_percent"] = cpu
    figures["cpu_percent_streamed_tok_s"] = tok_s
    figures["idle_cpu_percent"] = measure_idle_cpu_percent()
    figures["tty"] = measure_tty(
        tty_parser().parse_args(["--scenarios", "idle,idle-steady,one,race", "--seconds", "15"])
    )
    figures["tty_fps8"] = measure_tty(
        tty_parser().parse_args(["--scenarios", "one", "--seconds", "15", "--fps", "8"])
    )
    figures["tty_floor"] = measure_tty(
        tty_parser().parse_args(
            ["--scenarios", "floor,floor-idle,floor-race,floor-cell,floor-cell-25", "--seconds", "15"]
        )
    )
    figures["frame"] = {
        "app": asyncio.run(measure_frame_app((160, 48), 300)),
        "floor": asyncio.run(measure_frame_floor((160, 48), 300)),
    }
    if args.vllm_url:
        argv = ["--url", args.vllm_url, *(["--pid", str(args.vllm_pid)] if args.vllm_pid else [])]
        figures["server_cpu"] = measure_server_cpu(server_cpu_parser().parse_args(argv))
    figures["targets"] = {
        "server_cpu_added_ms_per_s": TARGETS_MS_PER_S,
        "parse_ms": 1.0,
        "cpu_percent": 3.0,
        "first_frame_s": 0.5,
        "tty": {
            "idle": {"cpu_percent": 1.0, "bytes_per_s": 1000},
            "idle-steady": {"cpu_percent": 1.0, "bytes_per_s": 1000},
            "one": {"cpu_percent": 1.5, "bytes_per_s": 10000, "latency_ms_p95": 50},
            "race": {"cpu_percent": 3.0, "latency_ms_p95": 50},
        },
    }
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
