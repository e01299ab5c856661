"""A recording of a real vLLM 0.32 (CPU build, ngram k=4) replays to the numbers the live app showed.

The fixture was written by tests/real_vllm/test_record_real.py (MTPWATCH_WRITE_FIXTURES=1): the
session's recording and a sample of the views the live app computed while recording it. Replaying
it needs no vLLM and no network.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import asdict
from typing import Any

from mtpwatch.session.replay import ReplaySource
from tests.datadir import DataDir

FOLDER = DataDir().path("recordings")
RECORDING = FOLDER / "vllm-0.32-cpu-ngram-k4.mtpw.gz"
VIEWS = FOLDER / "vllm-0.32-cpu-ngram-k4.views.json.gz"


def _plain(obj: object) -> Any:
    """A view as JSON would have it (tuples → lists)."""
    return json.loads(json.dumps(obj))


def test_real_vllm_recording_replays_to_what_was_shown_live() -> None:
    source = ReplaySource.open(RECORDING)
    with gzip.open(VIEWS, "rt", encoding="utf-8") as fh:
        live = json.load(fh)
    assert len(live) > 50
    with_acceptance = 0
    for entry in sorted(live, key=lambda e: e["t"]):
        source.advance(entry["t"])
        replayed = _plain(asdict(source.feeds[entry["s"]].view(entry["window"])))
        # The fixture predates the engine fields (llama.cpp support): they must say vLLM (or not yet
        # known, before the first scrape) and lack nothing; every field it holds must be equal.
        extra = {k: replayed.pop(k) for k in set(replayed) - set(entry["view"])}
        assert extra.get("engine", "vllm") in ("vllm", "unknown") and not extra.get("notes")
        # ... and predates the bandwidth's clock_speed: a real vLLM runs on a real clock.
        bw, bw_live = replayed["bandwidth"], entry["view"]["bandwidth"]
        bw_extra = {k: bw.pop(k) for k in set(bw) - set(bw_live)}
        assert bw_extra.get("clock_speed", 1.0) == 1.0
        assert replayed == entry["view"], (entry["t"], entry["s"], entry["window"])
        with_acceptance += bool(entry["view"]["acceptance_rate"])
    assert with_acceptance > 5


def test_real_vllm_recording_names_the_method_honestly() -> None:
    summary = ReplaySource.open(RECORDING).summary()
    servers = summary["servers"]
    # A: the server the app started (its log says ngram); B: the same server, attached.
    assert [s["method_label"] for s in servers] == ["ngram k=4", "speculative k=4"]
    assert all(s["version"] for s in servers)
    answers = summary["prompts"]
    assert len(answers) == 2 and all(a["tokens"] == 64 and a["acceptance_rate"] for a in answers)
