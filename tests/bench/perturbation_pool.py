"""Pool several windowed perturbation runs, and read the watched ones against their A/A control.

One `perturbation.py --windows 80` run resolves a median ratio to about ±0.8 % (docs/measurements/),
too wide to tell 0.995 from 0.990. Each of its pairs is a ratio of two adjacent windows under one stream,
so pairs from runs made one after another on the same server can be pooled: four runs narrow the
interval about twice. Runs are grouped by watcher and interval; each group gets its pooled median
with the distribution-free and the bootstrap 95 % CI, and each run's median for the spread. With a
control group (`--watcher none`), every watched group is also read against it: the difference of the
pooled medians with its bootstrap CI (the two samples drawn again independently), and the watched
median over the control's, which takes out any bias of the method's own (one machine's control
read 0.998, another's 1.001: docs/measurements/). Interleave the runs (control, watched, control, ...)
so a slow drift of the server reaches both groups alike:

    for i in 1 2 3 4; do for w in none scraper; do
      .venv/bin/python tests/bench/perturbation.py --url URL --cpus 1 --windows 80 --watcher $w \
        > pert_${i}_$w.json
    done; done
    .venv/bin/python tests/bench/perturbation_pool.py pert_*.json

Prints JSON. The runs must be windowed reports that list their pairs' ratios (`ratios`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mtpwatch.core.ab.stats import bootstrap_median_diff_ci, median_ci
from tests.reference import bootstrap_median_ci

sys.path.insert(0, str(Path(__file__).resolve().parent))
from perturbation import TARGET  # the target the single runs are judged by

CONTROL = "none (A/A control)"


def load(path: Path) -> dict[str, Any]:
    """One windowed report, or SystemExit with one line saying what is wrong with the file."""
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"perturbation_pool: {path}: not a JSON report ({exc})") from None
    if not isinstance(report, dict) or report.get("mode") != "windowed":
        raise SystemExit(f"perturbation_pool: {path}: not a windowed perturbation report (--windows N)")
    ratios = report.get("ratios")
    if not isinstance(ratios, list) or len(ratios) < 2:
        raise SystemExit(f"perturbation_pool: {path}: lists no pairs' ratios (an older report?)")
    return report


def group_key(report: dict[str, Any]) -> str:
    """The control is one group whatever its interval; a watcher's group is its kind and interval."""
    watcher = str(report["watcher"])
    if watcher == CONTROL:
        return watcher
    return f"{watcher} @ {report['scrape_interval_s']} s"


def summary(runs: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    ratios = [float(r) for _, report in runs for r in report["ratios"]]
    ci = median_ci(ratios)
    boot = bootstrap_median_ci(ratios)
    return {
        "runs": [
            {"file": name, "pairs": len(report["ratios"]), "median_ratio": report["median_ratio"]}
            for name, report in runs
        ],
        "pairs": len(ratios),
        "median_ratio": round(statistics.median(ratios), 4),
        "median_ratio_ci95": [round(ci.low, 4), round(ci.high, 4), round(ci.coverage, 3)],
        "median_ratio_bootstrap_ci95": [round(boot.low, 4), round(boot.high, 4)],
        "mean_ratio": round(statistics.fmean(ratios), 4),
        "run_medians_spread": round(
            max(float(report["median_ratio"]) for _, report in runs)
            - min(float(report["median_ratio"]) for _, report in runs),
            4,
        ),
    }


def against_control(control: list[float], watched: list[float]) -> dict[str, Any]:
    """The watched pooled median against the control's: their difference (bootstrap CI) and the
    watched median over the control's, the CI scaled by the control's median (its own spread is in
    the difference's CI)."""
    base = statistics.median(control)
    diff = statistics.median(watched) - base
    ci = bootstrap_median_diff_ci(control, watched)
    relative = (base + diff) / base
    return {
        "difference": round(diff, 4),
        "difference_bootstrap_ci95": [round(ci.low, 4), round(ci.high, 4)],
        "relative_to_control": round(relative, 4),
        "relative_to_control_ci95": [round((base + ci.low) / base, 4), round((base + ci.high) / base, 4)],
        "target": TARGET,
        "meets_target": relative >= TARGET,
    }


def pool(paths: Sequence[Path]) -> dict[str, Any]:
    groups: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for path in paths:
        report = load(path)
        groups.setdefault(group_key(report), []).append((path.name, report))
    out: dict[str, Any] = {"groups": {key: summary(runs) for key, runs in groups.items()}}
    if CONTROL in groups:
        control = [float(r) for _, report in groups[CONTROL] for r in report["ratios"]]
        out["against_control"] = {
            key: against_control(control, [float(r) for _, report in runs for r in report["ratios"]])
            for key, runs in groups.items()
            if key != CONTROL
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path, help="windowed reports of perturbation.py (JSON)")
    args = parser.parse_args()
    print(json.dumps(pool(args.reports), indent=2))


if __name__ == "__main__":
    main()
