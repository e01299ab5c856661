"""Benchmark: the k advisor's predicted decode tok/s against the measured one, for every k of a sweep.

Runs `mtpwatch bench --start MODEL --sweep-k 0,1,2,4,8` on each simulator preset (simulated vLLM
servers over real HTTP, one at a time, started through `--vllm "… mtpwatch sim"`), then prints,
per k, the measured decode tok/s and speed-up, the advisor's prediction (acceptance from the k=8
run, step model fitted over every measured k), and the errors on tok/s and on the paired speed-up
(which cancels drift between server restarts). Target: paired speed-up within 10 % for every k
below the top. With ``--real`` it also runs real vLLM (CPU build, ngram, k = 0, 1, 2, 3, 4
(``--real-k``) on the copy-the-text prompts, at concurrency 1 and 4 (``--real-concurrency``): the
best k at each and the batch-size schedule it gives; needs tests/real_vllm/setup.sh). With four
ks above 0, each k is also predicted from a fit over the others (held out), so the error is a
prediction and not an interpolation.

    python tests/bench/advisor.py [--runs 4] [--real [--verify-schedule]]

Prints figures; passes or fails nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

PRESETS = [
    # (model, drafter, GPU the preset simulates, speed-up of the simulated clock)
    ("google/gemma-4-E4B-it", "google/gemma-4-E4B-it-assistant", "GB10", 20),
    ("google/gemma-4-26B-A4B-it", "google/gemma-4-26B-A4B-it-assistant", "GB10", 20),
    ("google/gemma-4-31B-it", "google/gemma-4-31B-it-assistant", "H100 SXM", 20),
]


def run_sweep(args: list[str], env: dict[str, str], keep: Path | None = None) -> dict[str, Any]:
    """One `mtpwatch bench` sweep; its progress goes to stderr as it runs (a real sweep takes an
    hour on two cores), its JSON to `keep` when given (kept whatever happens next)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = keep if keep is not None else Path(tmp) / "sweep.json"
        cmd = [sys.executable, "-m", "mtpwatch", "bench", "--json-file", str(out), "--no-progress", *args]
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, text=True, check=False)
        if proc.returncode != 0 or not out.exists():
            sys.stderr.write(proc.stdout)
            raise SystemExit(f"sweep failed ({proc.returncode}): {' '.join(cmd)}")
        print(proc.stdout)
        doc: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
        return doc


def table(name: str, doc: dict[str, Any], speed: float = 1.0) -> float:
    """Print predicted vs measured; return the largest |error| over the ks the advisor predicted."""
    rows = doc["rows"]
    assert isinstance(rows, list)
    print(f"\n{name}  (tok/s on the {'simulated clock ÷ speed' if speed != 1 else 'wall clock'})")
    head = f"{'k':>3}{'measured':>11}{'speed-up':>10}{'predicted':>11}{'error':>9}"
    print(head + f"{'pred. speed-up':>16}{'error':>9}")
    worst = 0.0
    for r in rows:
        measured = r["decode_tok_s"]
        pred = r["predicted_decode_tok_s"]
        err, sp_err = r["prediction_error"], r.get("speedup_prediction_error")
        if sp_err is not None and r["k"] != doc["advisor"]["from_k"]:
            worst = max(worst, abs(sp_err))
        print(
            f"{r['k']:>3}{(measured or 0) / speed:>11.2f}{(r['speedup'] or 0):>10.2f}"
            f"{(pred or 0) / speed:>11.2f}{'' if err is None else f'{100 * err:+.1f}%':>9}"
            f"{(r['predicted_speedup'] or 0):>16.2f}{'' if sp_err is None else f'{100 * sp_err:+.1f}%':>9}"
        )
    advisor = doc["advisor"]
    print(
        f"best k measured: {doc['best_k']}; advisor's choice from k={advisor['from_k']}: {advisor['best_k']}"
    )
    print(f"step model: {advisor['fit']['kind']}, max residual {100 * advisor['fit']['max_residual']:.1f}%")
    print(f"largest |speed-up error| (k < {advisor['from_k']}): {100 * worst:.1f}%")
    # In-sample errors are 0 by construction when the step model is the measured table; the
    # predictive figure is each k predicted from a fit over the other ks (held out).
    held = advisor.get("held_out_speedup") or {}
    measured_speedup = {str(r["k"]): r["speedup"] for r in rows if r.get("speedup")}
    errors = {k: v / measured_speedup[k] - 1 for k, v in held.items() if k in measured_speedup}
    if errors:
        parts = [f"k={k}: {100 * e:+.1f}%" for k, e in sorted(errors.items())]
        print("held-out speed-up error: " + ", ".join(parts))
        if advisor["fit"]["kind"] == "table":
            worst = max(abs(e) for e in errors.values())
    spread = doc.get("baseline_life_spread")
    if isinstance(spread, float):
        print(f"server lives: two starts of the k=0 server differ by up to {100 * spread:.1f}% (A/A)")
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4, help="runs per prompt and arm (first is warm-up)")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--real", action="store_true", help="also real vLLM CPU, ngram (--real-k)")
    parser.add_argument("--sim-only-preset", default=None, help="run one preset (model id)")
    parser.add_argument("--real-only", action="store_true", help="skip the simulator presets")
    parser.add_argument("--real-concurrency", default="1,4", help="concurrencies of the real sweep")
    parser.add_argument("--real-k", default="0,1,2,3,4", help="ks of the real sweep")
    parser.add_argument("--real-json", type=Path, default=None, help="keep the real sweep's JSON here")
    parser.add_argument(
        "--verify-schedule",
        action="store_true",
        help="real sweep: also start the schedule it gives and measure it against the best fixed k",
    )
    opts = parser.parse_args()
    env = dict(os.environ)
    worst: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as ledger:
        env["MTPWATCH_SIM_GPU_DIR"] = ledger
        for model, drafter, gpu, speed in PRESETS:
            if opts.real_only or (opts.sim_only_preset and opts.sim_only_preset != model):
                continue
            sim = f"{sys.executable} -m mtpwatch sim --speed {speed}"
            args = [
                "--start",
                model,
                "--drafter",
                drafter,
                "--sweep-k",
                "0,1,2,4,8",
                "--vllm",
                sim,
                "--gpu",
                gpu,
            ]
            args += ["--prompts", "long-en", "--limit", "2", "--runs", str(opts.runs)]
            args += ["--max-tokens", str(opts.max_tokens), "--", "--max-model-len", "32768"]
            doc = run_sweep(args, env)
            worst[model] = table(f"simulator: {model} on {gpu}", doc, speed)
    if opts.real or opts.real_only:
        real = Path(os.environ.get("MTPWATCH_VLLM_VENV", "")) / "bin" / "vllm"
        models = Path(os.environ.get("MTPWATCH_TEST_MODELS", ""))
        if not real.exists() or not (models / "gemma3-270m").is_dir():
            raise SystemExit("--real needs: eval \"$(bash tests/real_vllm/setup.sh | grep '^export ')\"")
        env.update(VLLM_CPU_KVCACHE_SPACE="2", VLLM_CPU_OMP_THREADS_BIND="auto", HF_HUB_OFFLINE="1")
        env["VLLM_NO_USAGE_STATS"] = "1"
        args = ["--start", str(models / "gemma3-270m"), "--method", "ngram", "--sweep-k", opts.real_k]
        args += ["--vllm", str(real), "--prompts", str(Path(__file__).parent / "copy_prompts.jsonl")]
        args += ["--runs", str(opts.runs), "--startup-timeout", "600", "--concurrency", opts.real_concurrency]
        if opts.verify_schedule:
            args.append("--verify-schedule")
        args += ["--", "--dtype", "bfloat16", "--max-model-len", "2048", "--enforce-eager"]
        doc = run_sweep(args, env, opts.real_json)
        worst["real vLLM CPU ngram"] = table("real vLLM 0.32 CPU, Gemma 3 270M, ngram", doc)
        conc = doc.get("concurrency")
        if isinstance(conc, dict):
            print(f"best k per concurrency: {conc['best_k']}")
            print(f"schedule: {json.dumps(conc['speculative_config'])}")
            for row in conc.get("verification") or []:
                head = row["schedule_vs_best_fixed"] or {}
                print(
                    f"  c={row['concurrency']}: schedule / fixed k={row['best_fixed_k']} head to head "
                    f"{head.get('speedup')} (CI {head.get('speedup_ci')}, "
                    f"coverage {head.get('ci_coverage')}, "
                    f"{head.get('pairs')} pairs; that k's speed-up over k=0 {row['best_fixed_speedup']}), "
                    f"no slower: {row['no_slower']}"
                )
            if conc.get("verification_note"):
                print(f"  verification: {conc['verification_note']}")
    print(
        "\nsummary: largest |predicted − measured| / measured paired speed-up per sweep (target 10 %; "
        "held out where the step model is the measured table)"
    )
    for name, w in worst.items():
        print(f"  {name:40} {100 * w:5.1f}%")


if __name__ == "__main__":
    main()
