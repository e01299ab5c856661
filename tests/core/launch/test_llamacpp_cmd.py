"""llama-server command lines from mtpwatch's short flags, its environment, and the errors bad flags get."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mtpwatch.core.launch.llamacpp_cmd import build_llamacpp_argv, llamacpp_env
from mtpwatch.core.launch.vllm_cmd import VllmArgsError


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def test_draft_model_with_k() -> None:
    argv = build_llamacpp_argv("t.gguf", drafter="d.gguf", k=4, port=8123, served_model_name="gemma")
    assert argv[:3] == ["llama-server", "-m", "t.gguf"]
    assert flag(argv, "--host") == "127.0.0.1" and flag(argv, "--port") == "8123"
    assert "--metrics" in argv  # without it llama-server has no /metrics page
    assert flag(argv, "--alias") == "gemma"
    assert flag(argv, "--spec-type") == "draft-simple"
    assert flag(argv, "-md") == "d.gguf"
    assert flag(argv, "--spec-draft-n-max") == "4"


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("mtp", "draft-mtp"),
        ("ngram", "ngram-simple"),
        ("ngram-mod", "ngram-mod"),
        ("ngram-map-k", "ngram-map-k"),
    ],
)
def test_methods_map_to_spec_types(method: str, expected: str) -> None:
    assert flag(build_llamacpp_argv("t.gguf", method=method, k=3), "--spec-type") == expected


def test_k_alone_means_mtp_and_nothing_means_no_speculation() -> None:
    assert flag(build_llamacpp_argv("t.gguf", k=2), "--spec-type") == "draft-mtp"
    plain = build_llamacpp_argv("t.gguf")
    assert "--spec-type" not in plain and "--metrics" in plain
    assert "--spec-type" not in build_llamacpp_argv("t.gguf", no_spec=True)


def test_server_command_with_words_and_extra_last() -> None:
    argv = build_llamacpp_argv(
        "t.gguf", server="nice -n 5 /opt/llama-server", extra=["-c", "2048", "-t", "2"]
    )
    assert argv[:4] == ["nice", "-n", "5", "/opt/llama-server"]
    assert argv[-4:] == ["-c", "2048", "-t", "2"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": " "}, "MODEL is empty"),
        ({"port": 0}, "--port"),
        ({"k": 0}, "-k must be between 1 and 64"),
        ({"no_spec": True, "k": 4}, "--no-spec cannot be combined with -k"),
        ({"method": "draft_model"}, "needs a drafter model"),
        ({"method": "eagle3"}, "needs a drafter model"),
        ({"method": "ngram", "drafter": "d.gguf"}, "drop --drafter"),
        ({"method": "medusa"}, "not one llama-server knows"),
        ({"extra": ["--port", "9"]}, "--port is set by mtpwatch start"),
        ({"extra": ["--metrics"]}, "--metrics is set by mtpwatch start"),
        ({"server": "'unclosed"}, "--llama-server"),
        ({"server": ""}, "--llama-server is empty"),
    ],
)
def test_bad_flags_give_one_line(kwargs: dict[str, object], message: str) -> None:
    args = {"model": "t.gguf", **kwargs}
    with pytest.raises(VllmArgsError) as err:
        build_llamacpp_argv(**args)  # type: ignore[arg-type]
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_env_points_the_loader_at_libraries_beside_the_binary(tmp_path: Path) -> None:
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    assert llamacpp_env(str(binary), {}) == {}  # no libraries there: an installed build
    (tmp_path / "libllama.so").write_text("")
    assert llamacpp_env(str(binary), {}) == {"LD_LIBRARY_PATH": str(tmp_path)}
    assert llamacpp_env(str(binary), {"LD_LIBRARY_PATH": "/x"}) == {
        "LD_LIBRARY_PATH": os.pathsep.join([str(tmp_path), "/x"])
    }
    assert llamacpp_env(str(binary), {"LD_LIBRARY_PATH": str(tmp_path)}) == {}
    assert llamacpp_env("no-such-llama-server-here", {}) == {}
