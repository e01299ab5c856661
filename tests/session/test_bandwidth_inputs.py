"""Where the roofline panel finds its inputs when no --model-config is given."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mtpwatch.config import DisplaySettings
from mtpwatch.core.roofline.modelconfig import PRESET_DIR
from mtpwatch.session.bandwidth_inputs import BandwidthModel as _BandwidthModel

CLOSED = "http://127.0.0.1:9"  # nothing listens: /sim/info is absent, as on a real vLLM
CONFIG = PRESET_DIR / "gemma-4-E4B-it.json"


async def test_served_model_root_directory(tmp_path: Path) -> None:
    shutil.copy(CONFIG, tmp_path / "config.json")
    model = _BandwidthModel(DisplaySettings(gpu="H100 SXM"))
    await model.load(CLOSED, refs=(str(tmp_path), "my-served-name"))
    assert model.spec is not None and model.error == ""
    assert f"served model path {tmp_path}" in model.sources
    view = model.view(None, 0, None, 100)
    assert view.peak_gbps is not None and str(tmp_path) in view.config_source


async def test_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    snap = tmp_path / "models--acme--tiny-mtp" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    shutil.copy(CONFIG, snap / "config.json")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    model = _BandwidthModel(DisplaySettings(peak_gbps=273.0))
    await model.load(CLOSED, refs=("acme/tiny-mtp",), drafter_ref="acme/tiny-mtp")
    assert model.spec is not None and model.drafter is not None
    assert "HF cache (acme/tiny-mtp)" in model.sources and "drafter server log" in model.sources


async def test_nothing_found_says_how_to_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    model = _BandwidthModel(DisplaySettings(peak_gbps=273.0))
    await model.load(CLOSED, refs=("acme/not-cached", str(tmp_path / "missing")))
    assert model.spec is None
    assert "--model-config" in model.view(None, 0, None, None).note
