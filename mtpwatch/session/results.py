"""Saving the A/B view's measurement (F6) as a report file, in the same format as `mtpwatch bench --json`.

The document is `core.reports.reportio.report_document` of the measurement's `BenchReport`, with a
`meta` provenance block built from what the app knows about each server (URL, served model, vLLM
version, the command line it was started with and what its start-up log said), so `mtpwatch plot`
and `mtpwatch compare` read a saved measurement like a bench report.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from mtpwatch.config import DisplaySettings
from mtpwatch.core import provenance
from mtpwatch.core.ab.report import BenchReport
from mtpwatch.core.launch.vllm_cmd import is_loopback
from mtpwatch.core.reports import reportio
from mtpwatch.session.sources import Source


def default_path(now: dt.datetime | None = None) -> Path:
    """mtpwatch-ab-YYYYmmdd-HHMMSS.json (UTC) in the current folder."""
    t = now or dt.datetime.now(dt.timezone.utc)
    return Path(f"mtpwatch-ab-{t:%Y%m%d-%H%M%S}.json")


def feed_info(feed: Source, k: int | None) -> provenance.ArmInfo:
    """What the app knows about one server, without asking it again."""
    state = feed.state()
    spec = state.spec
    if spec.launch is not None:
        info = provenance.launched_info(spec.url, spec.launch.argv, facts=state.launch_facts)
    else:
        info = provenance.ArmInfo(url=spec.url)
    served = state.model or spec.model
    return dataclasses.replace(
        info,
        served_name=served,
        model=info.model or served,
        vllm_version=state.version,
        drafter=state.drafter_ref if state.drafter_ref and not info.drafter else info.drafter,
        k=k if info.k is None else info.k,
    )


def save(report: BenchReport, feeds: Sequence[Source], display: DisplaySettings, path: Path) -> Path:
    """Write the measurement's report document, with its provenance, to `path` (raises OSError);
    returns the path written."""
    arms: dict[str, provenance.ArmInfo] = {}
    for name, feed in zip(("a", "b"), feeds, strict=False):
        arm = report.primary.overall.arms.get(name)
        k = arm.acceptance.k if arm is not None and arm.acceptance is not None else None
        arms[name] = feed_info(feed, k)
    local = all(is_loopback(urlsplit(f.state().spec.url).hostname or "") for f in feeds)
    meta = provenance.build_meta(
        label=None,
        metadata={"source": "mtpwatch app, F6 measurement"},
        arms=arms,
        prompts=provenance.prompt_set(
            "console" if len(report.config.prompts) == 1 else "prompts", report.config.prompts
        ),
        gpu=provenance.report_gpu(display.gpu, local=local),
        temperature=report.config.temperature,
    )
    reportio.write_document(path, reportio.report_document(report, meta))
    return path
