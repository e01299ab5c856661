"""Command lines for the servers `mtpwatch start` launches: `vllm serve` and `mtpwatch sim`.

Short flags (`--drafter`, `-k`, `--method`) become vLLM's ``--speculative-config`` JSON, so that a
user types ``mtpwatch start google/gemma-4-E4B-it --drafter ... -k 4`` instead of quoting JSON over
SSH. Every check raises `VllmArgsError`, whose message is one line a user can act on."""

from __future__ import annotations

import ipaddress
import json
import shlex
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from mtpwatch.core.launch.specrule import MethodChoice, MethodRuleError, VllmVersion, choose_method

METHODS = ("mtp", "ngram", "draft_model", "eagle", "eagle3", "dflash", "dspark")
"""Methods the short flags know; a ``--speculative-config`` may name any other vLLM method."""
DRAFTER_METHODS = frozenset({"draft_model", "eagle", "eagle3", "dflash", "dspark"})
"""Methods that need a separate drafter model (``--drafter`` / ``"model"``)."""
NGRAM_DEFAULTS: Mapping[str, Any] = {
    "num_speculative_tokens": 4,
    "prompt_lookup_max": 4,
    "prompt_lookup_min": 2,
}
"""Prompt-lookup settings used when ``--method ngram`` gives no others (measured: 94-98 % on a
copy task with Gemma 3 270M)."""
UNKNOWN_VERSION = VllmVersion(None, "not read")
"""Planning without the installed version: 0.34's rule, the strictest."""
_API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


class VllmArgsError(ValueError):
    """Flags that cannot make a valid vLLM command line."""


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and 'localhost' (only this machine can connect)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def bind_warning(host: str, api_key: str | None) -> str | None:
    """The warning to print when a server would listen beyond this machine without a key."""
    if is_loopback(host) or api_key:
        return None
    return (
        f"warning: the server listens on {host} without --api-key: anyone who can reach this "
        "machine can send it prompts; prefer --host 127.0.0.1 with an SSH tunnel, or set --api-key"
    )


def _parse_config(text: str | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(text, Mapping):
        return dict(text)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise VllmArgsError(
            f"--speculative-config is not valid JSON: {exc.msg} at column {exc.colno}"
        ) from None
    if not isinstance(value, dict):
        raise VllmArgsError(
            "--speculative-config must be a JSON object like "
            f'\'{{"method":"mtp"}}\', not {type(value).__name__}'
        )
    return value


def check_server_flags(port: int, no_spec: bool = False, spec_flags: Mapping[str, object] = {}) -> None:
    """What every server's command line checks: the port, and no speculative flag with --no-spec
    (`spec_flags`: flag → its value, None when not given)."""
    if not 1 <= port <= 65535:
        raise VllmArgsError(f"--port must be between 1 and 65535, got {port}")
    given = [name for name, value in spec_flags.items() if value is not None]
    if no_spec and given:
        raise VllmArgsError(f"--no-spec cannot be combined with {', '.join(given)}")


def check_k(k: Any, source: str) -> int:
    """The one check of a k for either engine's command line: an integer from 1 to 64."""
    if isinstance(k, bool) or not isinstance(k, int):
        raise VllmArgsError(f"{source} must be an integer, got {k!r}")
    if not 1 <= k <= 64:
        raise VllmArgsError(f"{source} must be between 1 and 64, got {k}")
    return k


def build_speculative_config(
    *,
    drafter: str | None = None,
    k: int | None = None,
    method: str | None = None,
    speculative_config: str | Mapping[str, Any] | None = None,
    version: VllmVersion | None = None,
) -> tuple[dict[str, Any] | None, MethodChoice | None]:
    """The ``--speculative-config`` object from short flags and/or JSON (None: no speculation), and how
    its method was chosen (for the plan's line, and the method whose drafter the memory plan counts).
    Short flags fill the JSON's keys; a key given both ways with different values is an error. The
    method follows `specrule.choose_method` under `version` (None: unknown, 0.34's rule)."""
    config = _parse_config(speculative_config) if speculative_config is not None else {}
    for name in ("method", "model"):
        if name in config and not isinstance(config[name], str):
            raise VllmArgsError(f'--speculative-config: "{name}" must be a string, got {config[name]!r}')
    if "num_speculative_tokens" in config:
        check_k(config["num_speculative_tokens"], '--speculative-config: "num_speculative_tokens"')
    if method is not None and method not in METHODS:
        raise VllmArgsError(f"--method must be one of {', '.join(METHODS)}; got {method!r}")
    if k is not None:
        check_k(k, "-k")

    for key, value, flag in (
        ("method", method, "--method"),
        ("model", drafter, "--drafter"),
        ("num_speculative_tokens", k, "-k"),
    ):
        if value is None:
            continue
        if key in config and config[key] != value:
            raise VllmArgsError(
                f'{flag} {value} contradicts "{key}": {config[key]!r} in --speculative-config'
            )
        config[key] = value
    if not config:
        return None, None
    model, given = config.get("model"), config.get("method")
    draft_model = None if given == "ngram" else model  # ngram drafts from the prompt: no drafter to read
    try:
        choice = choose_method(method=given, drafter=draft_model, version=version or UNKNOWN_VERSION)
    except MethodRuleError as exc:
        raise VllmArgsError(str(exc)) from None
    if choice.sent is not None:
        config["method"] = choice.sent
    chosen = config.get("method")
    if chosen == "ngram":
        if "model" in config:
            raise VllmArgsError('ngram drafts from the prompt itself: drop --drafter (or "model")')
        for key, value in NGRAM_DEFAULTS.items():
            config.setdefault(key, value)
    elif chosen in DRAFTER_METHODS and "model" not in config:
        raise VllmArgsError(f"--method {chosen} needs a drafter model: add --drafter MODEL")
    # Keep the familiar order: method, model, num_speculative_tokens, then the rest.
    order = ["method", "model", "num_speculative_tokens"]
    ordered = {key: config[key] for key in order if key in config}
    return ordered | {key: value for key, value in config.items() if key not in order}, choice


def split_command(command: str, flag: str, example: str) -> list[str]:
    """The words of the server command given as `flag`; one line when it is unreadable or empty."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise VllmArgsError(f"{flag} {command!r}: {exc}") from None
    if not words:
        raise VllmArgsError(f"{flag} is empty; give {example}")
    return words


def _serve_prefix(vllm: str, model: str) -> list[str]:
    tokens = split_command(vllm, "--vllm", "the vLLM command, e.g. 'vllm' or 'uv run vllm'")
    if tokens[-1] == "--model":
        return [*tokens, model]
    if _API_SERVER_MODULE in tokens:
        # The OpenAI api_server module takes the model as --model, not as a positional argument.
        return [*tokens, "--model", model]
    if tokens[-1] == "serve":
        return [*tokens, model]
    return [*tokens, "serve", model]


#: The flags mtpwatch sets itself, and where each comes from per command (`ab` and `bench --start`
#: have no --port).
_OWNED_FLAGS = {
    "--host": "mtpwatch start --host; ab --start and bench --start listen on 127.0.0.1",
    "--port": "mtpwatch start --port; ab --start and bench --start pick free ports themselves",
    "--api-key": "mtpwatch's own --api-key, or $VLLM_API_KEY",
    "--served-model-name": "mtpwatch start --served-model-name",
    "--speculative-config": "--method, --drafter and -k, or mtpwatch start --speculative-config",
}


def build_vllm_argv(
    model: str,
    *,
    drafter: str | None = None,
    k: int | None = None,
    method: str | None = None,
    speculative_config: str | Mapping[str, Any] | None = None,
    no_spec: bool = False,
    host: str = "127.0.0.1",
    port: int = 8000,
    vllm: str = "vllm",
    served_model_name: str | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """The argv of a vLLM OpenAI server for `model`, with speculation from the short flags. `vllm` runs
    vLLM and may have several words (``uv run vllm``, ``python -m vllm.entrypoints.openai.api_server``);
    `extra` goes last, unchanged. An API key never goes on the command line (any local user can read
    it there): see `server_env`."""
    if not model.strip():
        raise VllmArgsError("MODEL is empty")
    spec_flags = {
        "--drafter": drafter,
        "-k": k,
        "--method": method,
        "--speculative-config": speculative_config,
    }
    check_server_flags(port, no_spec, spec_flags)  # so with --no-spec no config is built
    for arg in extra:
        if (name := arg.split("=", 1)[0]) in _OWNED_FLAGS:
            raise VllmArgsError(
                f"{name} is set by mtpwatch ({_OWNED_FLAGS[name]}): drop it from the vLLM flags"
            )
    config, _ = build_speculative_config(
        drafter=drafter, k=k, method=method, speculative_config=speculative_config
    )
    argv = [*_serve_prefix(vllm, model), "--host", host, "--port", str(port)]
    if served_model_name:
        argv += ["--served-model-name", served_model_name]
    if config is not None:
        argv += ["--speculative-config", json.dumps(config, separators=(",", ":"))]
    argv += list(extra)
    return argv


def build_sim_argv(
    preset: str,
    *,
    no_spec: bool = False,
    host: str = "127.0.0.1",
    port: int = 8000,
    extra: Sequence[str] = (),
    k: int | None = None,
    served_model_name: str | None = None,
    startup_delay: float | None = None,
) -> list[str]:
    """The argv of ``mtpwatch sim`` (the simulator) run by this Python interpreter."""
    check_server_flags(port)
    argv = [sys.executable, "-m", "mtpwatch", "sim", "--preset", preset, "--host", host, "--port", str(port)]
    if no_spec:
        argv.append("--no-spec")
    if k is not None:
        argv += ["-k", str(check_k(k, "-k"))]
    if served_model_name:
        argv += ["--served-model-name", served_model_name]
    if startup_delay is not None:
        argv += ["--startup-delay", f"{startup_delay:g}"]
    argv += list(extra)
    return argv


def server_env(api_key: str | None) -> dict[str, str]:
    """Environment for a launched server: the API key as ``VLLM_API_KEY``, which vLLM (and the
    simulator) read when ``--api-key`` is absent. Unlike argv (``/proc/PID/cmdline``, ``ps``), a
    process's environment is readable only by its owner."""
    return {"VLLM_API_KEY": api_key} if api_key else {}
