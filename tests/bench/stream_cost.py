"""CPU cost per SSE chunk of the streaming client, by HTTP path; prints JSON.

A simulator runs as a subprocess (`python -m mtpwatch sim --port 0`), so only the client's CPU is
counted (`time.process_time` of this process, not wall time). Each path streams the same
fixed-length completion, decodes every chunk with `ChunkDecoder` and adds it to `GenerationStats`:

- `httpx`: `VllmClient.generate` through httpx (the path https, proxies and mock transports use).
- `aiohttp`: `ClientSession.post` + `resp.content.iter_any()` + `SseDecoder`.
- `protocol`: `core.faststream.open_sse` (asyncio Protocol, batched wake-ups), decoded inline.
- `client`: `VllmClient.generate` on its default path for http:// (the fast path).

`--race SECONDS` instead measures the core client in the app's race scenario without the UI: two
simulators (MTP off and on) at `--race-speed` (30; watch_cost.py's race runs them at 90), both
generating back to back, each scraped at 4 Hz, with the tokens they generated a second: what the
race's data costs before anything is drawn.

Paths alternate within each round; the figure is the median over rounds, and each path's CPU per
chunk is also given as a paired ratio to `protocol`'s in the same round.

    .venv/bin/python -m tests.bench.stream_cost --rounds 3 --speed 50 --max-tokens 3000
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp

from mtpwatch.core.http.client import VllmClient
from mtpwatch.core.http.faststream import open_sse
from mtpwatch.core.http.generation import ChunkDecoder, GenerationRequest, GenerationStats
from mtpwatch.core.http.sse import DONE, SseDecoder

sys.path.insert(0, str(Path(__file__).resolve().parent))
from watch_cost import counters, start_sim

PRESET = "gemma4-e4b-gb10"


def _request(max_tokens: int) -> GenerationRequest:
    return GenerationRequest(
        "Write a very long essay about memory bandwidth.", max_tokens=max_tokens, ignore_eos=True
    )


async def run_httpx(url: str, max_tokens: int) -> tuple[int, int]:
    async with VllmClient(url, fast_stream=False) as client:
        result = await client.generate(_request(max_tokens))
    assert result.error is None, result.error
    return result.chunks, result.completion_tokens


async def run_client(url: str, max_tokens: int) -> tuple[int, int]:
    async with VllmClient(url) as client:
        result = await client.generate(_request(max_tokens))
    assert result.error is None, result.error
    return result.chunks, result.completion_tokens


def _consume(payloads: list[bytes], decoder: ChunkDecoder, stats: GenerationStats) -> None:
    for payload in payloads:
        if payload == DONE:
            continue
        event = decoder.decode(payload, time.perf_counter())
        if event is not None:
            stats.add(event)


async def run_aiohttp(url: str, max_tokens: int) -> tuple[int, int]:
    request = _request(max_tokens)
    decoder, sse, stats = ChunkDecoder(), SseDecoder(), GenerationStats()
    stats.start()
    async with (
        aiohttp.ClientSession() as session,
        session.post(url + request.path, json=request.body()) as resp,
    ):
        assert resp.status == 200
        async for data in resp.content.iter_any():
            _consume(sse.feed(data), decoder, stats)
    _consume(sse.close(), decoder, stats)
    result = stats.finish()
    return result.chunks, result.completion_tokens


async def run_protocol(url: str, max_tokens: int, read_interval: float = 0.0) -> tuple[int, int]:
    request = _request(max_tokens)
    decoder, stats = ChunkDecoder(), GenerationStats()
    stats.start()
    conn = await open_sse(
        url + request.path,
        request.body(),
        headers={},
        connect_timeout=5,
        read_timeout=60,
        read_interval=read_interval,
    )
    try:
        assert conn.status == 200
        while batch := await conn.batch():
            for t, payload in batch:
                if payload != DONE:
                    event = decoder.decode(payload, t)
                    if event is not None:
                        stats.add(event)
    finally:
        conn.close()
    result = stats.finish()
    return result.chunks, result.completion_tokens


PATHS: dict[str, Callable[[str, int], Awaitable[tuple[int, int]]]] = {
    "httpx": run_httpx,
    "aiohttp": run_aiohttp,
    "protocol": run_protocol,
    "protocol_5ms": functools.partial(run_protocol, read_interval=0.005),
    "protocol_10ms": functools.partial(run_protocol, read_interval=0.010),
    "client": run_client,
}


async def measure(url: str, path: str, max_tokens: int) -> dict[str, float]:
    t_cpu, t_wall = time.process_time(), time.perf_counter()
    chunks, tokens = await PATHS[path](url, max_tokens)
    cpu, wall = time.process_time() - t_cpu, time.perf_counter() - t_wall
    return {
        "us_per_chunk": 1e6 * cpu / chunks,
        "chunks": chunks,
        "tokens": tokens,
        "chunks_per_s": chunks / wall,
        "cpu_percent": 100 * cpu / wall,
    }


def _start_sim(speed: float, *extra: str) -> tuple[subprocess.Popen[str], str]:
    return start_sim("--preset", PRESET, "--speed", str(speed), *extra)


async def race(
    urls: list[str], seconds: float, fast: bool, read_interval: float | None
) -> tuple[float, float]:
    """(CPU % of one core, tok/s) for the core client alone in the app's race scenario (no UI).

    Both servers generate at once, back to back, while each is scraped (and parsed) at 4 Hz.
    """
    clients = [VllmClient(u, fast_stream=fast, read_interval=read_interval or 0.0) for u in urls]
    stop = asyncio.Event()

    async def scraper(client: VllmClient) -> None:
        while not stop.is_set():
            await client.scrape()
            await asyncio.sleep(0.25)

    async def generator(client: VllmClient) -> None:
        while not stop.is_set():
            result = await client.generate(_request(4000), on_event=lambda e: None)
            assert result.error is None, result.error

    await asyncio.gather(*(c.scrape() for c in clients))
    tasks = [asyncio.create_task(f(c)) for c in clients for f in (scraper, generator)]
    await asyncio.sleep(1.0)
    gen0 = (await asyncio.to_thread(counters, urls))[0]
    t_cpu, t_wall = time.process_time(), time.perf_counter()
    await asyncio.sleep(seconds)
    cpu, wall = time.process_time() - t_cpu, time.perf_counter() - t_wall
    gen1 = (await asyncio.to_thread(counters, urls))[0]
    stop.set()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for client in clients:
        await client.aclose()
    return 100.0 * cpu / wall, (gen1 - gen0) / wall


def main_race(args: argparse.Namespace) -> None:
    sims = [_start_sim(args.race_speed, "--no-spec"), _start_sim(args.race_speed)]
    try:
        time.sleep(0.5)
        variants = {"httpx": (False, None), "fast": (True, 0.0), "fast_20ms": (True, 0.02)}
        runs: dict[str, list[tuple[float, float]]] = {v: [] for v in variants}
        for r in range(args.rounds):
            for name in variants if r % 2 == 0 else list(variants)[::-1]:
                fast, interval = variants[name]
                runs[name].append(asyncio.run(race([u for _, u in sims], args.race, fast, interval)))
    finally:
        for sim, _ in sims:
            sim.terminate()
            sim.wait(timeout=30)
    print(
        json.dumps(
            {
                "scenario": f"race, 2 simulators at speed {args.race_speed:g}, scrapes at 4 Hz, no UI",
                "seconds": args.race,
                "cpu_percent": {
                    k: {
                        "median": round(statistics.median(c for c, _ in v), 1),
                        "runs": [round(c, 1) for c, _ in v],
                        "tok_s_runs": [round(t) for _, t in v],
                    }
                    for k, v in runs.items()
                },
            },
            indent=2,
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--speed", type=float, default=50.0)
    parser.add_argument("--max-tokens", type=int, default=3000)
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument(
        "--race",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="Instead: CPU %% of the core client in the app's race scenario (no UI).",
    )
    parser.add_argument("--race-speed", type=float, default=30.0, help="The race's simulator speed.")
    args = parser.parse_args()
    if args.race:
        main_race(args)
        return
    paths = args.paths.split(",")
    sim, url = _start_sim(args.speed)
    try:
        time.sleep(0.5)  # the URL is printed just before the server starts serving

        async def rounds() -> dict[str, list[dict[str, float]]]:
            runs: dict[str, list[dict[str, float]]] = {p: [] for p in paths}
            await measure(url, paths[0], 200)  # warm-up: imports, first connection
            for r in range(args.rounds):
                order = paths if r % 2 == 0 else paths[::-1]
                for path in order:
                    runs[path].append(await measure(url, path, args.max_tokens))
            return runs

        runs = asyncio.run(rounds())
    finally:
        sim.terminate()
        sim.wait(timeout=30)
    report = {
        "speed": args.speed,
        "max_tokens": args.max_tokens,
        "rounds": args.rounds,
        "paths": {
            p: {
                "us_per_chunk_median": round(statistics.median(r["us_per_chunk"] for r in rs), 1),
                "us_per_chunk_runs": [round(r["us_per_chunk"], 1) for r in rs],
                "chunks": int(rs[0]["chunks"]),
                "tokens": int(rs[0]["tokens"]),
                "chunks_per_s_median": round(statistics.median(r["chunks_per_s"] for r in rs)),
                "cpu_percent_median": round(statistics.median(r["cpu_percent"] for r in rs), 1),
            }
            for p, rs in runs.items()
        },
    }
    if "protocol" in runs:
        # Paired within each round (same simulator, same moment): CPU per chunk of a path ÷ the fast
        # path's, > 1 meaning the fast path is cheaper.
        report["paired_us_per_chunk_ratio_vs_protocol"] = {
            p: {
                "median": round(
                    statistics.median(
                        a["us_per_chunk"] / b["us_per_chunk"]
                        for a, b in zip(rs, runs["protocol"], strict=True)
                    ),
                    2,
                ),
                "rounds": [
                    round(a["us_per_chunk"] / b["us_per_chunk"], 2)
                    for a, b in zip(rs, runs["protocol"], strict=True)
                ],
            }
            for p, rs in runs.items()
            if p != "protocol"
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
