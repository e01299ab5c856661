"""What one `/metrics` answer costs the server: the whole page against the filtered tiers.

For each way of asking (the whole page `/metrics`, the hot tier, the slow tier with and without the
histograms' buckets, the activity tier, hot and slow in one request, a filter that matches nothing)
it sends N GETs on one kept-alive connection, in interleaved rounds, and reads the server's CPU time
(utime + stime of the listening process, vLLM's API server, from /proc/<pid>/stat; `--tree` adds its
children) before and after. Prints JSON: bytes and CPU ms per answer for each, and what a 4 Hz
watcher costs the server per second each way (tiered while tokens flow: 4 hot answers + 1 slow
answer a second; an idle server, and the fleet: the activity tier, the hot tier every 2 s). `--gap
0.25` spaces the answers as the app does.

    .venv/bin/python tests/bench/scrape_cost.py                 # a simulator in its own process
    .venv/bin/python tests/bench/scrape_cost.py --url http://127.0.0.1:8000 --answers 400
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
from perturbation import TICKS, _cpu_s, _listener_pid, _tree  # the server's processes and their CPU time
from watch_cost import start_sim  # a simulator in its own process, as the benchmarks run it

from mtpwatch.core.metrics.filtered import (
    ACTIVITY_NAMES,
    ALL_NAMES,
    FULL_PATH,
    HOT_NAMES,
    IDLE_HOT_INTERVAL_S,
    SLOW_NAMES,
    filter_path,
)

_BUCKETS = tuple(n.replace("_count", "_bucket") for n in SLOW_NAMES if n.endswith("_count"))
WAYS = {
    "full_page": FULL_PATH,
    "hot": filter_path(HOT_NAMES),
    "slow": filter_path(SLOW_NAMES),
    "slow_with_buckets": filter_path(SLOW_NAMES + _BUCKETS),  # the slow tier before it dropped them
    "activity": filter_path(ACTIVITY_NAMES),
    "hot_and_slow": filter_path(ALL_NAMES),
    "nothing": filter_path(["mtpwatch_no_such_sample"]),
}


def _get(conn: http.client.HTTPConnection, path: str) -> int:
    conn.request("GET", path, headers={"Accept": "text/plain"})
    resp = conn.getresponse()
    body = resp.read()
    if resp.status != 200:
        raise SystemExit(f"scrape_cost: GET {path[:60]} answered {resp.status}")
    return len(body)


def measure(
    url: str, answers: int, rounds: int, *, tree: bool = False, gap_s: float = 0.0
) -> dict[str, object]:
    """The figures; `tree`: count the listening process's children too (vLLM's EngineCore does not
    answer /metrics: by default only the API server, the process that listens, is counted); `gap_s`:
    a pause before each answer (the app's 0.25 s: the server's caches go cold in between, which
    answers in a row hide)."""
    parts = urlsplit(url)
    port = parts.port or 80
    pid = _listener_pid(port)
    if pid is None:
        raise SystemExit(f"scrape_cost: no process found listening on port {port}")
    pids = _tree(pid) if tree else [pid]
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", port, timeout=30)
    sizes = {name: _get(conn, path) for name, path in WAYS.items()}
    for path in WAYS.values():  # warm caches on both sides
        for _ in range(5):
            _get(conn, path)
    cpu = dict.fromkeys(WAYS, 0.0)
    wall = dict.fromkeys(WAYS, 0.0)
    per_round = max(1, answers // rounds)
    for _ in range(rounds):
        for name, path in WAYS.items():
            c0, t0 = _cpu_s(pids), time.monotonic()
            for _ in range(per_round):
                if gap_s:
                    time.sleep(gap_s)
                _get(conn, path)
            cpu[name] += _cpu_s(pids) - c0
            wall[name] += time.monotonic() - t0
    conn.close()
    n = per_round * rounds
    idle_hot = 1 / IDLE_HOT_INTERVAL_S  # hot answers a second on an idle server
    per = {name: 1000 * cpu[name] / n for name in WAYS}
    return {
        "url": url,
        "processes": len(pids),
        "answers_each": n,
        "bytes": sizes,
        "server_cpu_ms_per_answer": {k: round(v, 3) for k, v in per.items()},
        "wall_ms_per_answer": {k: round(1000 * wall[k] / n, 3) for k in WAYS},
        "gap_s": gap_s,
        "server_cpu_ms_per_s_at_4hz": {
            "full_page": round(4 * per["full_page"], 2),
            "tiered, tokens flowing (4 hot + 1 slow)": round(4 * per["hot"] + per["slow"], 2),
            f"tiered, idle server; the fleet ({4 - idle_hot:g} activity + {idle_hot:g} hot)": round(
                (4 - idle_hot) * per["activity"] + idle_hot * per["hot"], 2
            ),
        },
        "bytes_per_s_at_4hz": {
            "full_page": 4 * sizes["full_page"],
            "tiered, tokens flowing (4 hot + 1 slow)": 4 * sizes["hot"] + sizes["slow"],
            f"tiered, idle server; the fleet ({4 - idle_hot:g} activity + {idle_hot:g} hot)": round(
                (4 - idle_hot) * sizes["activity"] + idle_hot * sizes["hot"]
            ),
        },
        "cpu_clock_ticks_per_s": TICKS,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a live server (default: start a simulator)")
    parser.add_argument("--answers", type=int, default=400, help="answers per way of asking")
    parser.add_argument("--rounds", type=int, default=8, help="interleaved rounds")
    parser.add_argument("--tree", action="store_true", help="count the server's child processes too")
    parser.add_argument("--gap", type=float, default=0.0, help="seconds before each answer (the app: 0.25)")
    args = parser.parse_args()
    if args.url:
        report = measure(args.url.rstrip("/"), args.answers, args.rounds, tree=args.tree, gap_s=args.gap)
    else:
        sim, url = start_sim("--speed", "20", "-k", "3")
        try:
            report = measure(url, args.answers, args.rounds, tree=args.tree, gap_s=args.gap)
            report["server"] = "mtpwatch sim (its own process), k=3"
        finally:
            sim.terminate()
            sim.wait(timeout=30)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
