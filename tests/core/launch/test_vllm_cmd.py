"""vllm serve / mtpwatch sim command lines from short flags, and the errors bad flags get."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mtpwatch.core.launch.vllm_cmd import (
    VllmArgsError,
    bind_warning,
    build_sim_argv,
    build_speculative_config,
    build_vllm_argv,
    is_loopback,
    server_env,
)


def spec_of(argv: list[str]) -> dict[str, object] | None:
    if "--speculative-config" not in argv:
        return None
    value = json.loads(argv[argv.index("--speculative-config") + 1])
    assert isinstance(value, dict)
    return value


def test_mtp_with_drafter_and_k() -> None:
    # the assistant's config.json (bundled) declares Gemma 4 MTP, so the method is named
    drafter = "google/gemma-4-E4B-it-assistant"
    argv = build_vllm_argv("google/gemma-4-E4B-it", drafter=drafter, k=4, port=8123)
    assert argv[:3] == ["vllm", "serve", "google/gemma-4-E4B-it"]
    assert argv[3:7] == ["--host", "127.0.0.1", "--port", "8123"]
    assert spec_of(argv) == {"method": "mtp", "model": drafter, "num_speculative_tokens": 4}
    # compact JSON, keys in the familiar order
    assert argv[argv.index("--speculative-config") + 1].startswith('{"method":"mtp","model":')


def test_a_drafter_of_unknown_kind_gets_no_method(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM 0.34 refuses "mtp" for a DFlash checkpoint: unknown offline, the method is left to vLLM."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    argv = build_vllm_argv("google/gemma-4-E4B-it", drafter="z-lab/gemma-4-E4B-it-DFlash", k=4)
    assert spec_of(argv) == {"model": "z-lab/gemma-4-E4B-it-DFlash", "num_speculative_tokens": 4}


def test_mtp_without_drafter_uses_own_heads() -> None:
    assert spec_of(build_vllm_argv("m", method="mtp", k=2)) == {"method": "mtp", "num_speculative_tokens": 2}
    assert spec_of(build_vllm_argv("m", k=3)) == {"method": "mtp", "num_speculative_tokens": 3}


def test_ngram_gets_prompt_lookup_defaults_and_rejects_drafter() -> None:
    assert spec_of(build_vllm_argv("m", method="ngram")) == {
        "method": "ngram",
        "num_speculative_tokens": 4,
        "prompt_lookup_max": 4,
        "prompt_lookup_min": 2,
    }
    assert spec_of(build_vllm_argv("m", method="ngram", k=6))["num_speculative_tokens"] == 6  # type: ignore[index]
    with pytest.raises(VllmArgsError, match="drop --drafter"):
        build_vllm_argv("m", method="ngram", drafter="d")


@pytest.mark.parametrize("method", ["draft_model", "eagle3", "dflash", "dspark"])
def test_drafter_methods_need_a_drafter(method: str) -> None:
    with pytest.raises(VllmArgsError, match="needs a drafter model"):
        build_vllm_argv("m", method=method, k=3)
    assert spec_of(build_vllm_argv("m", method=method, drafter="d", k=3)) == {
        "method": method,
        "model": "d",
        "num_speculative_tokens": 3,
    }


def test_no_spec_has_no_config_and_rejects_spec_flags() -> None:
    assert spec_of(build_vllm_argv("m", no_spec=True)) is None
    assert spec_of(build_vllm_argv("m")) is None
    with pytest.raises(VllmArgsError, match="--no-spec cannot be combined with -k, --method"):
        build_vllm_argv("m", no_spec=True, k=2, method="mtp")


def test_speculative_config_json_is_validated_and_merged() -> None:
    merged, _ = build_speculative_config(speculative_config='{"method":"ngram","prompt_lookup_max":5}', k=3)
    assert merged == {
        "method": "ngram",
        "num_speculative_tokens": 3,
        "prompt_lookup_max": 5,
        "prompt_lookup_min": 2,
    }
    for bad, message in [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"method": 3}', '"method" must be a string'),
        ('{"method":"mtp","num_speculative_tokens":"4"}', "must be an integer"),
        ('{"method":"mtp","num_speculative_tokens":true}', "must be an integer"),
        ('{"method":"mtp","num_speculative_tokens":0}', "between 1 and 64"),
        ('{"method":"mtp","model":7}', '"model" must be a string'),
    ]:
        with pytest.raises(VllmArgsError, match=message):
            build_speculative_config(speculative_config=bad)
    with pytest.raises(VllmArgsError, match="contradicts"):
        build_speculative_config(speculative_config='{"method":"mtp"}', method="ngram")
    # a method the short flags do not know passes through untouched
    assert build_speculative_config(speculative_config='{"method":"suffix"}')[0] == {"method": "suffix"}


def test_bad_values() -> None:
    with pytest.raises(VllmArgsError, match="--method must be one of"):
        build_vllm_argv("m", method="medusa2")
    with pytest.raises(VllmArgsError, match="-k must be between"):
        build_vllm_argv("m", k=0)
    with pytest.raises(VllmArgsError, match="--port"):
        build_vllm_argv("m", port=70000)
    with pytest.raises(VllmArgsError, match="MODEL is empty"):
        build_vllm_argv(" ")
    with pytest.raises(VllmArgsError, match=r"--port is set by mtpwatch \(mtpwatch start --port"):
        build_vllm_argv("m", extra=["--port=9"])
    with pytest.raises(VllmArgsError, match="--vllm is empty"):
        build_vllm_argv("m", vllm="  ")


@pytest.mark.parametrize(
    ("vllm", "prefix"),
    [
        ("vllm", ["vllm", "serve", "M"]),
        ("/opt/venv/bin/vllm", ["/opt/venv/bin/vllm", "serve", "M"]),
        ("uv run vllm serve", ["uv", "run", "vllm", "serve", "M"]),
        (
            "python -m vllm.entrypoints.openai.api_server",
            ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "M"],
        ),
        ("'/my dir/python' -m x --model", ["/my dir/python", "-m", "x", "--model", "M"]),
    ],
)
def test_vllm_command_forms(vllm: str, prefix: list[str]) -> None:
    argv = build_vllm_argv("M", vllm=vllm, no_spec=True)
    assert argv[: len(prefix)] == prefix
    assert argv[len(prefix)] == "--host"


def test_name_and_extra_go_in_order_and_the_key_goes_in_the_environment() -> None:
    argv = build_vllm_argv("M", served_model_name="gemma", extra=["--max-model-len", "8192"], k=2)
    assert argv[argv.index("--served-model-name") + 1] == "gemma"
    assert argv[-2:] == ["--max-model-len", "8192"]
    assert "--api-key" not in argv
    assert server_env("s3cret") == {"VLLM_API_KEY": "s3cret"}
    assert server_env(None) == {} and server_env("") == {}
    with pytest.raises(VllmArgsError, match="--api-key"):
        build_vllm_argv("M", extra=["--api-key", "s3cret"])


def test_bind_warning() -> None:
    assert bind_warning("127.0.0.1", None) is None
    assert bind_warning("localhost", None) is None
    assert bind_warning("::1", None) is None
    assert bind_warning("0.0.0.0", "key") is None
    warning = bind_warning("0.0.0.0", None)
    assert warning is not None and "without --api-key" in warning
    assert bind_warning("gpu-box.lan", None) is not None
    assert is_loopback("127.0.0.2") and not is_loopback("10.0.0.1")


def test_sim_argv() -> None:
    argv = build_sim_argv("gb10-e4b", no_spec=True, port=8101, k=3, served_model_name="x", startup_delay=0.5)
    assert argv[:4] == [sys.executable, "-m", "mtpwatch", "sim"]
    assert argv[4:10] == ["--preset", "gb10-e4b", "--host", "127.0.0.1", "--port", "8101"]
    assert "--no-spec" in argv
    assert argv[argv.index("-k") + 1] == "3"
    assert argv[argv.index("--startup-delay") + 1] == "0.5"
    assert "--no-spec" not in build_sim_argv("p")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["M", "--no-spec", "-k", "3"], "--no-spec cannot be combined with -k"),
        (["M", "--speculative-config", "[1]"], "must be a JSON object"),
        (["M", "--method", "ngram", "--drafter", "d"], "drop --drafter"),
        (["M", "--", "--port", "9"], "--port is set by mtpwatch (mtpwatch start --port"),
    ],
)
def test_start_command_bad_flags_one_line(args: list[str], message: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mtpwatch", "start", *args], capture_output=True, text=True, timeout=60
    )
    assert out.returncode != 0
    assert message in out.stderr
    assert "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1
