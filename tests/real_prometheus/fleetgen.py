"""A synthetic vLLM fleet with faults the tests know, written for a real metrics store.

`make_fleet(n, span_s, end)` draws N instances (several models, methods mtp / eagle3 / dflash /
ngram and their k, realistic per-position acceptance falling with position) and injects one of each
fault; `history(inst)` gives each one's counter history every 15 s up to `end` ("now", so instant
queries see it); `openmetrics(fleet)` writes it for `promtool tsdb create-blocks-from openmetrics`
(Prometheus) and `prometheus_text(fleet)` for VictoriaMetrics's `/api/v1/import/prometheus`
(timestamps in ms). `load_prometheus` / `load_victoria` start Debian's store on loopback with the data.

The series are vLLM's (vllm-metrics.md, the 0.32 fixtures): `vllm:spec_decode_num_drafts_total`,
`…_draft_tokens_total`, `…_accepted_tokens_total`, `…_accepted_tokens_per_pos_total{position}`,
`vllm:generation_tokens_total`, the running/waiting/KV gauges, all with `model_name` and `engine`,
plus the scrape's target labels `job`, `instance` and `spec_method` (vLLM does not export the method:
vllm-metrics.md, "The method … is **not** in `/metrics`", so the fleet sets it as a target label) and
Prometheus's own `up`.

Faults (one instance each, `Instance.fault`):
- "collapsed": acceptance 0.05 of its group's.
- "slow": a third of its group's tok/s.
- "k": k one less than the rest of its model.
- "down": `up == 0` for the last 4 minutes (no counter samples then, as when a scrape fails).
- "stale": every sample stops 2 minutes before the end (`up` too: the target left service discovery).
- "missing": every sample stops 12 minutes before the end (seen in the last hour, silent now).
- "restart": counters back to 0 a minute before the end (healthy otherwise).
"""

from __future__ import annotations

import os
import random
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

STEP_S = 15
"""Scrape interval of the generated data."""

FAULTS = ("collapsed", "slow", "k", "down", "stale", "missing", "restart")

# (model, method, k, first-position acceptance, decay per position, tok/s of a healthy instance)
PROFILES: tuple[tuple[str, str, int, float, float, float], ...] = (
    ("Qwen/Qwen3-32B", "eagle3", 3, 0.78, 0.82, 900.0),
    ("deepseek-ai/DeepSeek-V3", "mtp", 1, 0.85, 1.0, 1400.0),
    ("google/gemma-4-26B-A4B-it", "mtp", 2, 0.80, 0.85, 1600.0),
    ("Qwen/Qwen3-8B", "dflash", 4, 0.72, 0.80, 2200.0),
    ("meta-llama/Llama-3.1-8B-Instruct", "ngram", 4, 0.45, 0.70, 1900.0),
)

DOWN_FOR_S = 240
STALE_FOR_S = 120
MISSING_FOR_S = 720
RESTART_BEFORE_S = 60


@dataclass
class Instance:
    """One vLLM server of the fleet."""

    instance: str
    model: str
    method: str
    k: int
    accept: tuple[float, ...]
    """P(position i accepted) per draft: falls with the position."""
    tok_s: float
    fault: str = ""

    @property
    def labels(self) -> str:
        return (
            f'engine="0",instance="{self.instance}",job="vllm",model_name="{self.model}",'
            f'spec_method="{self.method}"'
        )


@dataclass
class Fleet:
    instances: list[Instance]
    start: int
    """First sample (Unix s)."""
    end: int
    """Last sample (Unix s)."""
    seed: int = 0
    faults: dict[str, str] = field(default_factory=dict)
    """fault → instance label."""


def make_fleet(n: int, span_s: int, end: float | None = None, seed: int = 0, lead_s: float = 0.0) -> Fleet:
    """N instances over `span_s` seconds ending at `end` (default now + `lead_s`: samples a store
    holds before their time are invisible until then, so a fleet loaded in under `lead_s` seconds
    reads as live when queried near its end); one of each fault."""
    assert n >= 4 * len(PROFILES), "at least 4 instances per profile so every group has peers"
    rng = random.Random(seed)
    t_end = int((time.time() + lead_s) if end is None else end) // STEP_S * STEP_S
    instances: list[Instance] = []
    for i in range(n):
        model, method, k, a0, decay, tok_s = PROFILES[i % len(PROFILES)]
        jitter = rng.uniform(0.97, 1.03)
        accept = tuple(min(0.99, a0 * jitter * decay**p) for p in range(k))
        host = f"10.{i // 250}.{i % 250}.{1 + i % 7}:8000"
        instances.append(Instance(host, model, method, k, accept, tok_s * rng.uniform(0.9, 1.1)))
    fleet = Fleet(instances, t_end - span_s, t_end, seed)
    # Faults on instances of different profiles, none on the first of a profile.
    for j, fault in enumerate(FAULTS):
        inst = instances[len(PROFILES) * (j + 1) + j % len(PROFILES)]
        inst.fault = fault
        fleet.faults[fault] = inst.instance
        if fault == "collapsed":
            inst.accept = tuple(a * 0.05 for a in inst.accept)
        elif fault == "slow":
            inst.tok_s /= 3
        elif fault == "k":
            inst.k -= 1 if inst.k > 1 else -1
            inst.accept = (*inst.accept, inst.accept[-1] * 0.8)[: inst.k]
    return fleet


Point = tuple[int, dict[str, float], bool]
"""(Unix s, series suffix → value, up)."""


def history(fleet: Fleet, inst: Instance) -> Iterator[Point]:
    """The counters and gauges of one instance at every step, as its scrapes would read them."""
    rng = random.Random(f"{fleet.seed}:{inst.instance}")
    c = {"drafts": 0.0, "draft_tokens": 0.0, "accepted": 0.0, "gen": 0.0}
    pos = [0.0] * inst.k
    c["gen"] = rng.uniform(1e5, 1e6)  # a server that ran before the span
    last = fleet.end
    if inst.fault == "stale":
        last = fleet.end - STALE_FOR_S
    elif inst.fault == "missing":
        last = fleet.end - MISSING_FOR_S
    for t in range(fleet.start, last + 1, STEP_S):
        if (
            inst.fault == "restart"
            and fleet.end - RESTART_BEFORE_S <= t < fleet.end - RESTART_BEFORE_S + STEP_S
        ):
            c = dict.fromkeys(c, 0.0)
            pos = [0.0] * inst.k
        up = not (inst.fault == "down" and t > fleet.end - DOWN_FOR_S)
        tokens = inst.tok_s * STEP_S * rng.uniform(0.9, 1.1)
        per_draft = 1 + sum(inst.accept)
        drafts = round(tokens / per_draft)
        # the prompt mix moves acceptance a few % from one scrape to the next (hundreds of drafts a
        # scrape: the binomial noise itself is smaller)
        mix = rng.uniform(0.96, 1.04)
        got = [min(float(drafts), float(round(drafts * a * mix))) for a in inst.accept]
        c["drafts"] += drafts
        c["draft_tokens"] += drafts * inst.k
        c["accepted"] += sum(got)
        c["gen"] += drafts + sum(got)
        for p, g in enumerate(got):
            pos[p] += g
        values = {
            "vllm:spec_decode_num_drafts_total": c["drafts"],
            "vllm:spec_decode_num_draft_tokens_total": c["draft_tokens"],
            "vllm:spec_decode_num_accepted_tokens_total": c["accepted"],
            "vllm:generation_tokens_total": c["gen"],
            "vllm:num_requests_running": float(rng.randint(4, 32)),
            "vllm:num_requests_waiting": float(rng.randint(0, 3)),
            "vllm:kv_cache_usage_perc": rng.uniform(0.2, 0.8),
        }
        for p in range(inst.k):
            values[f'vllm:spec_decode_num_accepted_tokens_per_pos_total|position="{p}"'] = pos[p]
        yield t, values, up


_TYPES = {
    "vllm:num_requests_running": "gauge",
    "vllm:num_requests_waiting": "gauge",
    "vllm:kv_cache_usage_perc": "gauge",
}


def _series(fleet: Fleet) -> dict[str, list[tuple[str, int, float]]]:
    """Metric name → [(labels, t, value)], every instance's samples in time order."""
    out: dict[str, list[tuple[str, int, float]]] = {"up": []}
    for inst in fleet.instances:
        for t, values, up in history(fleet, inst):
            out["up"].append(
                (f'instance="{inst.instance}",job="vllm",spec_method="{inst.method}"', t, float(up))
            )
            if not up:
                continue
            for key, v in values.items():
                name, _, extra = key.partition("|")
                labels = inst.labels + ("," + extra if extra else "")
                out.setdefault(name, []).append((labels, t, v))
    return out


def openmetrics(fleet: Fleet) -> str:
    """OpenMetrics text with timestamps (s), each family contiguous, each series in time order."""
    lines: list[str] = []
    for name, samples in _series(fleet).items():
        kind = "counter" if name.endswith("_total") else _TYPES.get(name, "gauge")
        family = name.removesuffix("_total") if kind == "counter" else name
        lines.append(f"# TYPE {family} {kind}")
        by_series: dict[str, list[tuple[int, float]]] = {}
        for labels, t, v in samples:
            by_series.setdefault(labels, []).append((t, v))
        for labels, pts in by_series.items():
            lines.extend(f"{name}{{{labels}}} {v:g} {t}" for t, v in pts)
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def prometheus_text(fleet: Fleet) -> str:
    """Prometheus text with timestamps in ms, for VictoriaMetrics's /api/v1/import/prometheus."""
    return "".join(
        f"{name}{{{labels}}} {v!r} {t * 1000}\n"
        for name, samples in _series(fleet).items()
        for labels, t, v in samples
    )


def _wait_ready(url: str, path: str, log: Path, what: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + path, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{what} not ready within 60 s:\n" + log.read_text()[-2000:])


def load_prometheus(start: object, binary: str, fleet: Fleet, tmp: Path, port: int) -> str:
    """promtool tsdb create-blocks-from openmetrics, then Prometheus on 127.0.0.1:`port` over those
    blocks (no scrape configs: it serves only the generated data). `start` is Procs.start."""
    promtool = str(Path(binary).with_name("promtool"))
    data = tmp / "fleet.om"
    data.write_text(openmetrics(fleet))
    tsdb = tmp / "tsdb"
    out = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(data), str(tsdb)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    data.unlink()
    config = tmp / "prometheus.yml"
    config.write_text("global: {scrape_interval: 15s}\n")
    log = tmp / "prometheus.log"
    start(  # type: ignore[operator]
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tsdb}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    _wait_ready(url, "/-/ready", log, "Prometheus")
    return url


def load_victoria(start: object, binary: str, fleet: Fleet, tmp: Path, port: int) -> str:
    """Debian's victoria-metrics on 127.0.0.1:`port` (tmp storage, every flag at its default, so
    `-search.latencyOffset` is its 30 s), the fleet imported through /api/v1/import/prometheus."""
    log = tmp / "victoria.log"
    start(  # type: ignore[operator]
        [
            binary,
            f"-storageDataPath={tmp / 'vm'}",
            f"-httpListenAddr=127.0.0.1:{port}",
            "-retentionPeriod=1",
        ],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    _wait_ready(url, "/health", log, "VictoriaMetrics")
    body = prometheus_text(fleet).encode()
    with httpx.Client(timeout=300) as client:
        i = 0
        while i < len(body):  # whole lines per request, 8 MiB at most
            j = len(body) if i + (8 << 20) >= len(body) else body.rfind(b"\n", i, i + (8 << 20)) + 1
            r = client.post(url + "/api/v1/import/prometheus", content=body[i:j])
            assert r.status_code == 204, r.text
            i = j
        # Make the import searchable now and drop results cached before it (VictoriaMetrics's
        # backfilling advice: https://docs.victoriametrics.com/#backfilling).
        client.get(url + "/internal/force_flush")
        client.get(url + "/internal/resetRollupResultCache")
    return url


def main() -> None:  # pragma: no cover - a manual entry point
    import argparse

    p = argparse.ArgumentParser(description="Write a synthetic fleet as OpenMetrics text.")
    p.add_argument("--instances", type=int, default=200)
    p.add_argument("--span", type=int, default=1800)
    p.add_argument("--out", default=os.devnull)
    a = p.parse_args()
    Path(a.out).write_text(openmetrics(make_fleet(a.instances, a.span)))


if __name__ == "__main__":  # pragma: no cover
    main()
