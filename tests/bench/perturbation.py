"""Does watching slow the server down? Decode tok/s with mtpwatch scraping at 4 Hz vs not attached.

Runs paired trials against a live vLLM, alternating A (nobody scraping) and B (a separate
process scrapes /metrics every 0.25 s and parses it the way the app does), one streamed
completion per trial, and prints JSON: per-pair ratios B/A, their median, and whether the median
meets the target (>= 0.995: watching costs at most 0.5 % of decode speed).

    .venv/bin/python tests/bench/perturbation.py --url http://127.0.0.1:8000 [--pairs 8]

Start the server e.g. with `mtpwatch start MODEL --method ngram -k 4 --headless`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.generation import GenerationRequest

ROOT = Path(__file__).resolve().parents[2]
TARGET = 0.995
PROMPT = (
    "The quick brown fox jumps over the lazy dog near the river bank. " * 3
    + "The quick brown fox jumps over the lazy dog near the river"
)

# The watcher runs in its own interpreter, like mtpwatch would: "on"/"off" on stdin toggle it.
SCRAPER = textwrap.dedent(
    """
    import asyncio, sys, time
    from mtpwatch.core.http.client import VllmClient
    from mtpwatch.core.metrics.snapshot import parse_snapshot
    from mtpwatch.core.metrics.rates import Collector

    async def main(url, interval):
        client = VllmClient(url)
        collector = Collector()
        loop = asyncio.get_running_loop()
        active = asyncio.Event()
        count = 0

        async def scrape_loop():
            nonlocal count
            while True:
                await active.wait()
                t = time.monotonic()
                collector.add(parse_snapshot(await client.scrape_text()), t)
                collector.window(10.0, t)
                count += 1
                await asyncio.sleep(max(0.0, interval - (time.monotonic() - t)))

        task = asyncio.create_task(scrape_loop())
        print("ready", flush=True)
        while line := (await loop.run_in_executor(None, sys.stdin.readline)).strip():
            if line == "on":
                count = 0
                active.set()
                while count == 0:  # scraping is under way before the trial starts
                    await asyncio.sleep(0.01)
            else:
                active.clear()
            print(f"{line} {count}", flush=True)
        task.cancel()
        await client.aclose()

    asyncio.run(main(sys.argv[1], float(sys.argv[2])))
    """
)


class Scraper:
    def __init__(self, url: str, interval: float) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SCRAPER, url, str(interval)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self._read() == "ready"

    def _read(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def command(self, word: str) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()
        reply = self._read().split()
        return int(reply[1])

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


async def trial(client: VllmClient, model: str | None, max_tokens: int) -> float:
    request = GenerationRequest(PROMPT, model=model, max_tokens=max_tokens, ignore_eos=True)
    result = await client.generate(request)
    if result.error or result.decode_tok_s is None:
        raise SystemExit(f"perturbation: generation failed: {result.error}")
    return result.decode_tok_s


async def run(url: str, model: str | None, pairs: int, max_tokens: int, interval: float) -> dict[str, object]:
    scraper = Scraper(url, interval)
    rows = []
    try:
        async with VllmClient(url) as client:
            await trial(client, model, 32)  # warm-up: the first request after start is slow
            for i in range(pairs):
                a = await trial(client, model, max_tokens)
                scraper.command("on")
                t0 = time.monotonic()
                b = await trial(client, model, max_tokens)
                scrapes = scraper.command("off")
                elapsed = time.monotonic() - t0
                rows.append(
                    {
                        "pair": i,
                        "a_tok_s": round(a, 2),
                        "b_tok_s": round(b, 2),
                        "ratio": round(b / a, 4),
                        "scrape_hz": round(scrapes / elapsed, 2),
                    }
                )
    finally:
        scraper.close()
    ratios = [float(r["ratio"]) for r in rows]
    median = statistics.median(ratios)
    return {
        "url": url,
        "max_tokens": max_tokens,
        "scrape_interval_s": interval,
        "pairs": rows,
        "median_ratio": round(median, 4),
        "min_ratio": min(ratios),
        "max_ratio": max(ratios),
        "median_a_tok_s": round(statistics.median(float(r["a_tok_s"]) for r in rows), 2),
        "median_b_tok_s": round(statistics.median(float(r["b_tok_s"]) for r in rows), 2),
        "target": TARGET,
        "meets_target": median >= TARGET,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", default=None, help="served model name (default: the only one)")
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--interval", type=float, default=0.25, help="scrape interval (4 Hz = 0.25)")
    args = parser.parse_args()
    report = asyncio.run(run(args.url, args.model, args.pairs, args.max_tokens, args.interval))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
