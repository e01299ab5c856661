"""What the engine runs, and which advice and which lossless check hold under it (`core.sweeps.engine`)."""

from __future__ import annotations

from mtpwatch.core.provenance import launched_info
from mtpwatch.core.sweeps.engine import (
    dynamic_k_missing,
    engine_mode,
    engine_mode_of_arm,
    parse_schedule,
    version_tuple,
)


def test_a_plain_chain_drafter_keeps_every_rule() -> None:
    mode = engine_mode({"method": "ngram", "num_speculative_tokens": 4}, vllm_version="0.32.0")
    assert mode.flags == () and mode.truncation_holds and mode.lossless is True
    assert not mode.advice_withheld and mode.caveat() is None
    assert mode.headline() == "ngram k=4 (vLLM 0.32.0, from the command line)"


def test_block_drafters_break_the_truncation_rule_not_the_lossless_check() -> None:
    for method in ("dflash", "dspark"):
        mode = engine_mode({"method": method, "model": "org/drafter", "num_speculative_tokens": 16})
        (flag,) = mode.flags
        assert flag.name == "block drafter" and "block size" in flag.what
        assert "does not predict a smaller k" in flag.advice and flag.lossless.startswith("holds")
        assert not mode.truncation_holds and mode.advice_withheld and mode.lossless is True


def test_fly_is_lossy_and_says_so() -> None:
    config = {
        "method": "draft_model",
        "model": "Qwen/Qwen3-0.6B",
        "num_speculative_tokens": 8,
        "rejection_sample_method": "fly",
        "fly_window_size": 6,
        "fly_entropy_threshold": 0.3,
    }
    mode = engine_mode(config, vllm_version="0.33.0")
    (flag,) = mode.flags
    assert flag.name == "fly verification (lossy)" and "next 6 drafts agree" in flag.what
    assert "expected, not a bug" in flag.lossless and mode.lossless is False
    assert mode.truncation_holds and not mode.advice_withheld
    assert "fly verification" in mode.headline() and "lossy" in (mode.caveat() or "")
    # block verification is lossless; synthetic acceptance gives no advice at all
    assert engine_mode({"method": "mtp", "rejection_sample_method": "block"}).lossless is True
    synthetic = engine_mode(
        {"method": "mtp", "num_speculative_tokens": 3, "rejection_sample_method": "synthetic"}
    )
    assert synthetic.lossless is False and synthetic.advice_withheld


def test_a_batch_size_schedule_and_adaptive_verification() -> None:
    config = {
        "method": "mtp",
        "num_speculative_tokens": 4,
        "num_speculative_tokens_per_batch_size": [[1, 2, 4], [3, 16, 2], [17, 256, 1]],
    }
    mode = engine_mode(config, vllm_version="0.32.1")
    assert mode.schedule == ((1, 2, 4), (3, 16, 2), (17, 256, 1))
    (flag,) = mode.flags
    assert "1–2: k=4, 3–16: k=2, 17–256: k=1" in flag.what and "per concurrency" in flag.advice
    assert "has no num_speculative_tokens_per_batch_size" not in flag.what
    old = engine_mode(config, vllm_version="0.31.2")
    assert "vLLM 0.31.2 has no num_speculative_tokens_per_batch_size" in old.flags[0].what
    assert dynamic_k_missing("0.31.2") == old.flags[0].what.split("; ")[-1]
    assert dynamic_k_missing("0.32.0") is None and dynamic_k_missing(None) is None
    assert mode.headline().startswith("mtp k≤4") and mode.caveat() == "k follows the batch size"
    adaptive = engine_mode(
        {"method": "dspark", "num_speculative_tokens": 8, "enable_adaptive_verification": True}
    )
    assert [f.name for f in adaptive.flags] == ["block drafter", "adaptive verification"]
    assert parse_schedule([[1, 2]]) is None and parse_schedule("1,2,3") is None and parse_schedule([]) is None
    assert version_tuple("0.33.1rc1+cpu") == (0, 33) and version_tuple("dev") is None


def test_the_mode_of_a_report_arm_names_its_source() -> None:
    argv = ["vllm", "serve", "m", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 3}']
    launched = engine_mode_of_arm(launched_info("http://127.0.0.1:8001", argv).to_json())
    assert launched.source == "command line" and launched.k == 3 and launched.method == "ngram"
    attached = engine_mode_of_arm({"url": "http://h:8000", "k": 2, "vllm_version": "0.32.0"})
    assert attached.source == "/metrics" and attached.k == 2 and attached.lossless is True
    logged = engine_mode_of_arm({"spec_config": {"from_log": {"method": "mtp"}}, "method": "mtp", "k": 2})
    assert logged.source == "start-up log" and logged.method == "mtp"
    unknown = engine_mode_of_arm({"url": "x"})
    assert unknown.source == "unknown" and unknown.lossless is None


def test_llamacpp_synthetic_acceptance_withholds_the_advice() -> None:
    """llama.cpp#27711's benchmark-only synthetic acceptance, from the command line or /props: the
    same refusal as vLLM's `rejection_sample_method: synthetic`."""
    from mtpwatch.core.http.engines import parse_props, props_synthetic
    from mtpwatch.core.sweeps.engine import engine_mode_of_arm, llamacpp_synthetic

    argv = [
        "llama-server",
        "-m",
        "t.gguf",
        "--spec-type",
        "draft-mtp",
        "--spec-synthetic-acceptance-length",
        "2.5",
    ]
    config = llamacpp_synthetic(argv)
    assert config == {
        "rejection_sample_method": "synthetic",
        "synthetic_source": "llama.cpp's --spec-synthetic-acceptance-length 2.5",
    }
    mode = engine_mode(config, method="draft-mtp")
    assert mode.advice_withheld and mode.lossless is False
    assert "synthetic acceptance: no k advice" in (mode.caveat() or "")
    assert "drawn from llama.cpp's --spec-synthetic-acceptance-length 2.5" in mode.flags[0].what
    rates = llamacpp_synthetic(["llama-server", "--spec-synthetic-acceptance-rates=0.9,0.7"])
    assert rates is not None and rates["synthetic_source"].endswith(
        "--spec-synthetic-acceptance-rates 0.9,0.7"
    )
    assert llamacpp_synthetic(["llama-server", "--spec-type", "draft-mtp"]) is None
    # bench/sweep provenance: a launched llama-server's argv
    assert engine_mode_of_arm({"launch_argv": argv, "method": "draft-mtp"}).advice_withheld
    assert not engine_mode_of_arm({"launch_argv": argv[:5], "method": "draft-mtp"}).advice_withheld
    # /props or /slots: any spelling of a key naming synthetic acceptance, with a value set
    slot = {
        "id": 0,
        "params": {"speculative.types": "draft-mtp", "speculative.synthetic_acceptance_length": 2.5},
    }
    assert props_synthetic(slot) == "speculative.synthetic_acceptance_length=2.5"
    assert props_synthetic({"params": {"speculative.synthetic_acceptance_rates": []}}) is None
    assert props_synthetic({"params": {"speculative.types": "draft-mtp"}}) is None
    info = parse_props({"default_generation_settings": {"n_ctx": 4096}}, [slot])
    assert info is not None and info.synthetic == "speculative.synthetic_acceptance_length=2.5"
    props_mode = engine_mode(llamacpp_synthetic(None, info.synthetic))
    assert props_mode.advice_withheld
    assert "llama.cpp's /props speculative.synthetic_acceptance_length=2.5" in props_mode.flags[0].what
