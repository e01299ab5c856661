"""Launch → first frame of `mtpwatch demo` on a real pty, the way a user starts it (figures, not a test).

    .venv/bin/python tests/bench/first_frame.py [--runs 10] [--cols 160 --rows 48] [--trees OLD,NEW]
        [--no-bytecode]

Each run spawns `python -c "…main()" demo` on a pseudo-terminal of the given size and times from the
spawn to the first frame the app writes: the first write that holds the title bar's text
(`mtpwatch demo`) after the terminal's alternate screen was entered. The app is then asked to quit
(Ctrl+Q) and reaped; its simulators stop with it. Python's start-up, the imports, click, the
simulators' start and Textual's first compose are all inside the figure. With `--trees`, the two
source trees run in turn (A B A B …) and the paired ratios NEW/OLD are printed too. The app's own
CPU seconds at its first frame are printed beside the wall time: on a shared, loaded machine the
wall time is mostly waiting for a core. Prints JSON.
With `--floor`, `floor_first_frame.py` (a minimal Textual app of the demo's shape) runs in turn too,
and the paired ratios app/floor are printed: what the same visible first frame costs at the least.
Target (issue 39): ≤ 0.5 s at 160×48.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import select
import signal
import statistics
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FLOOR = Path(__file__).resolve().parent / "floor_first_frame.py"
ALT_SCREEN = b"\x1b[?1049h"
TITLE = b"mtpwatch demo"


def cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used so far (Linux's /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(
    tree: Path, cols: int, rows: int, timeout_s: float = 30.0, *, bytecode: bool = True, floor: bool = False
) -> tuple[float, float]:
    """Seconds from spawn to the first frame of `mtpwatch demo` from `tree`'s sources, and the CPU
    seconds the app had used by then (its own process: on a loaded machine the wall time is mostly
    waiting for a core, the CPU time much less so)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    code = f"import sys; sys.path.insert(0, {str(tree)!r}); from mtpwatch.cli import main; sys.exit(main())"
    env = {**os.environ, "TERM": "xterm-256color", "MTPWATCH_CONFIG": "/dev/null"}
    # Compiled bytecode, as an installed package runs: with PYTHONDONTWRITEBYTECODE inherited, every
    # run compiled mtpwatch from source again (~0.3 s of CPU on a 2-core machine), unless --no-bytecode.
    if bytecode:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    t0 = time.perf_counter()
    argv = [sys.executable, str(FLOOR)] if floor else [sys.executable, "-c", code, "demo"]
    proc = subprocess.Popen(
        argv,
        stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True, cwd=tree,
    )  # fmt: skip
    os.close(slave)
    seen, elapsed, cpu = b"", None, float("nan")
    try:
        while time.perf_counter() - t0 < timeout_s:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            seen += chunk
            at = seen.find(ALT_SCREEN)
            if at >= 0 and TITLE in seen[at:]:
                elapsed, cpu = time.perf_counter() - t0, cpu_s(proc.pid)
                break
        os.write(master, b"\x11")  # Ctrl+Q
        deadline = time.perf_counter() + 15
        while proc.poll() is None and time.perf_counter() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    os.read(master, 65536)
                except OSError:
                    break
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        os.close(master)
    if elapsed is None:
        raise RuntimeError(f"no first frame from {tree} within {timeout_s} s")
    return elapsed, cpu


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--cols", type=int, default=160)
    p.add_argument("--rows", type=int, default=48)
    p.add_argument("--trees", help="OLD,NEW: two source trees, run in turn; prints paired NEW/OLD ratios")
    p.add_argument(
        "--no-bytecode",
        action="store_true",
        help="compile mtpwatch from source on every run (trees without __pycache__: a checkout run "
        "with PYTHONDONTWRITEBYTECODE set)",
    )
    p.add_argument("--floor", action="store_true", help="also time floor_first_frame.py; prints app/floor")
    args = p.parse_args()
    trees = [Path(t).resolve() for t in args.trees.split(",")] if args.trees else [ROOT]
    bytecode = not args.no_bytecode
    before_load = os.getloadavg()[0]
    for tree in trees:  # warm-up: the page cache and each tree's .pyc files
        one_run(tree, args.cols, args.rows, bytecode=bytecode)
    times: dict[str, list[float]] = {str(t): [] for t in trees}
    cpus: dict[str, list[float]] = {str(t): [] for t in trees}
    floor: list[float] = []
    for _ in range(args.runs):
        for tree in trees:
            wall, cpu = one_run(tree, args.cols, args.rows, bytecode=bytecode)
            times[str(tree)].append(wall)
            cpus[str(tree)].append(cpu)
        if args.floor:
            floor.append(one_run(ROOT, args.cols, args.rows, bytecode=bytecode, floor=True)[0])
    out: dict[str, object] = {
        "size": f"{args.cols}x{args.rows}",
        "runs": args.runs,
        "bytecode": bytecode,
        "loadavg_1m_before_after": [before_load, os.getloadavg()[0]],
        "first_frame_s": {
            t: {"median": statistics.median(v), "min": min(v), "max": max(v)} for t, v in times.items()
        },
        "app_cpu_at_first_frame_s": {
            t: {"median": statistics.median(v), "min": min(v), "max": max(v)} for t, v in cpus.items()
        },
    }
    if floor:
        app = times[str(trees[-1])]
        over = sorted(a / f for a, f in zip(app, floor, strict=True))
        out["floor_first_frame_s"] = {
            "median": statistics.median(floor),
            "min": min(floor),
            "max": max(floor),
        }
        out["paired_ratio_app_over_floor"] = {
            "median": statistics.median(over),
            "min": over[0],
            "max": over[-1],
        }
    if len(trees) == 2:
        old, new = (times[str(t)] for t in trees)
        ratios = sorted(n / o for o, n in zip(old, new, strict=True))
        out["paired_ratio_new_over_old"] = {
            "median": statistics.median(ratios),
            "min": ratios[0],
            "max": ratios[-1],
        }
        old_cpu, new_cpu = (cpus[str(t)] for t in trees)
        cpu_ratios = sorted(n / o for o, n in zip(old_cpu, new_cpu, strict=True))
        out["paired_cpu_ratio_new_over_old"] = {
            "median": statistics.median(cpu_ratios),
            "min": cpu_ratios[0],
            "max": cpu_ratios[-1],
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
