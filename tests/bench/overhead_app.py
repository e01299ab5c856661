"""Overhead of the app itself: CPU while watching two simulators, and time to the first frame.

`measure_cpu_percent()`: the app (headless, real compositor) attached to two simulator
subprocesses, scraping each at 4 Hz while prompts stream (the rate reached is measured); returns the
app process's CPU time over wall time in % of one core. The simulators run in their own processes,
so their CPU is not counted. `measure_first_frame_s()`: from spawning `python` to the app's first
painted frame (Textual's Ready event), Python start-up included.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from contextlib import AsyncExitStack

from mtpwatch.commands.options import free_port
from mtpwatch.config import AppConfig, DisplaySettings, ServerSpec
from mtpwatch.core.launch.process import ServerProcess
from mtpwatch.core.launch.vllm_cmd import build_sim_argv
from tests.feeds import monitor_of

SPEED = 70.0
"""Simulator time factor. The E4B preset streams ~18 (MTP off) + ~39 (MTP on) tok/s, but answers
end by themselves and the race waits for both arms before the next prompt, so the rate reached is
lower than 57 × SPEED: it is measured from the simulators' own counters and reported (≈1,500 tok/s
here)."""


async def _generated(urls: list[str]) -> float:
    """Σ vllm:generation_tokens_total over the servers (their own counters, not the app's)."""
    from mtpwatch.core.http.client import VllmClient

    total = 0.0
    for url in urls:
        async with VllmClient(url) as client:
            total += (await client.scrape()).generation_tokens
    return total


async def _measure_cpu(seconds: float) -> tuple[float, float]:
    from mtpwatch.ui.app import make_app

    async with AsyncExitStack() as stack:
        specs = []
        for label, no_spec in (("A", True), ("B", False)):
            port = free_port()
            proc = await ServerProcess.start(
                build_sim_argv("gemma4-e4b-gb10", no_spec=no_spec, port=port, extra=["--speed", str(SPEED)])
            )
            stack.push_async_callback(proc.stop)
            url = f"http://127.0.0.1:{port}"
            await proc.wait_healthy(url, timeout=60)
            specs.append(ServerSpec(label=label, url=url))
        display = DisplaySettings(scrape_interval_s=0.25, max_tokens=4000)
        app = make_app(AppConfig(servers=specs, display=display, mode="ab", schedule="race"))
        async with app.run_test(size=(200, 50)) as pilot:
            await pilot.pause(1.0)
            screen = monitor_of(app.screen)
            urls = [spec.url for spec in specs]
            generated_before = await _generated(urls)
            t_wall, t_cpu = time.perf_counter(), time.process_time()
            tokens_before = sum(len(p.stream.lines) for p in screen.panels)
            while time.perf_counter() - t_wall < seconds:
                if not screen.generating:
                    screen.send("Write a very long essay about memory bandwidth.")
                await asyncio.sleep(0.2)
            cpu, wall = time.process_time() - t_cpu, time.perf_counter() - t_wall
            tok_s = (await _generated(urls) - generated_before) / wall
            lines = sum(len(p.stream.lines) for p in screen.panels) - tokens_before
            screen.cancel_generation()
            await pilot.pause(0.2)
            print(
                f"overhead_app: {cpu:.2f} s CPU over {wall:.1f} s wall; {tok_s:.0f} tok/s streamed "
                f"(server counters); {lines} answer lines",
                file=sys.stderr,
            )
            await app.shutdown_servers()
    return 100.0 * cpu / wall, tok_s


async def _measure_idle(seconds: float) -> float:
    from mtpwatch.ui.app import make_app

    async with AsyncExitStack() as stack:
        port = free_port()
        proc = await ServerProcess.start(build_sim_argv("gemma4-e4b-gb10", port=port))
        stack.push_async_callback(proc.stop)
        url = f"http://127.0.0.1:{port}"
        await proc.wait_healthy(url, timeout=60)
        display = DisplaySettings(scrape_interval_s=0.25)
        app = make_app(AppConfig(servers=[ServerSpec(label="MTP on", url=url)], display=display))
        async with app.run_test(size=(200, 50)) as pilot:
            await pilot.pause(2.0)
            t_wall, t_cpu = time.perf_counter(), time.process_time()
            await asyncio.sleep(seconds)
            cpu, wall = time.process_time() - t_cpu, time.perf_counter() - t_wall
            print(f"overhead_app idle: {cpu:.2f} s CPU over {wall:.1f} s wall", file=sys.stderr)
            await app.shutdown_servers()
    return 100.0 * cpu / wall


def measure_idle_cpu_percent(seconds: float = 15.0) -> float:
    """CPU % of one core used by the app watching one idle simulator at 4 Hz (no prompt streaming)."""
    return asyncio.run(_measure_idle(seconds))


def measure_streaming(seconds: float = 15.0) -> tuple[float, float]:
    """(CPU % of one core, tok/s streamed): the app watching two simulators at 4 Hz while tokens stream."""
    return asyncio.run(_measure_cpu(seconds))


def measure_cpu_percent(seconds: float = 15.0) -> float:
    """CPU % of one core used by the app watching two simulators at 4 Hz while tokens stream."""
    return measure_streaming(seconds)[0]


_FIRST_FRAME = """
import sys
from textual import events
from mtpwatch.config import AppConfig, ServerSpec
from mtpwatch.ui.app import make_app

app = make_app(AppConfig(servers=[ServerSpec(label="x", url="http://127.0.0.1:9")]), autostart=False)

def hook(message):
    if isinstance(message, events.Ready):
        print("READY", flush=True)
        app.exit()

async def main():
    async with app.run_test(size=(120, 40), message_hook=hook) as pilot:
        await pilot.pause(5)

import asyncio
asyncio.run(main())
"""


def measure_first_frame_s() -> float:
    """Seconds from spawning the interpreter to the app's first painted frame (headless)."""
    t0 = time.perf_counter()
    with subprocess.Popen([sys.executable, "-c", _FIRST_FRAME], stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip() == "READY":
                elapsed = time.perf_counter() - t0
                break
        else:
            raise RuntimeError("the app never reported its first frame")
        proc.wait(timeout=30)
    return elapsed


if __name__ == "__main__":
    print(f"first_frame_s = {measure_first_frame_s():.3f}")
    print(f"cpu_percent = {measure_cpu_percent():.1f}")
    print(f"idle_cpu_percent = {measure_idle_cpu_percent():.1f}")
