"""`vllm serve`'s command line, read by the simulator so that it can stand in for vLLM.

``mtpwatch sim --speed 10 serve MODEL --port 8001 --speculative-config '{...}'
--gpu-memory-utilization 0.44 --max-model-len 8192`` behaves like that vLLM server: the preset
follows the model's name (unless ``--preset`` is given), speculation follows
``--speculative-config`` (none: the baseline), and the memory flags are checked against the
simulated GPU. Flags the simulator has no use for are logged and ignored. The
``python -m vllm.entrypoints.openai.api_server --model MODEL`` form is read too.

Flags are spelled as vLLM's parser takes them: ``--flag value`` or ``--flag=value``, underscores
for dashes in a long flag (``--speculative_config``: vLLM's `FlexibleArgumentParser` turns them into
dashes), and ``-sc`` for ``--speculative-config`` (`EngineArgs.add_cli_args`:
``add_argument("--speculative-config", "-sc", ...)``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mtpwatch.sim.presets import DEFAULT_PRESET, PRESETS

#: vLLM flags that take no value (so the next word is not theirs).
_BOOL_FLAGS = frozenset(
    {
        "--enforce-eager",
        "--trust-remote-code",
        "--disable-log-stats",
        "--disable-log-requests",
        "--enable-prefix-caching",
        "--no-enable-prefix-caching",
        "--disable-hybrid-kv-cache-manager",
        "--enable-chunked-prefill",
        "--enable-mfu-metrics",
        "--enable-auto-tool-choice",
    }
)
_VALUE_FLAGS = frozenset(
    {
        "--speculative-config",
        "--gpu-memory-utilization",
        "--kv-cache-memory-bytes",
        "--max-model-len",
        "--model",
    }
)


_ALIASES = {"-sc": "--speculative-config"}
"""vLLM's short forms of the flags the simulator reads."""


def _flag_name(name: str) -> str:
    """A flag as vLLM's parser sees it: its short alias resolved, a long flag's underscores dashes."""
    if name.startswith("--"):
        return "--" + name[2:].replace("_", "-")
    return _ALIASES.get(name, name)


class ServeArgsError(ValueError):
    """A `vllm serve` command line the simulator cannot read (one line)."""


@dataclass(frozen=True, slots=True)
class ServeArgs:
    """What the simulator takes from `vllm serve`'s command line."""

    model: str
    speculative_config: dict[str, Any] | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_memory_bytes: int | None = None
    max_model_len: int | None = None
    enforce_eager: bool = False
    ignored: tuple[str, ...] = ()
    """Flags (with their values) the simulator does not model."""


def preset_for_model(model: str) -> str:
    """The simulator preset whose model the name points at (E4B, 26B-A4B, 31B), else the default."""
    name = model.lower().rstrip("/").rsplit("/", 1)[-1]
    for key, preset in PRESETS.items():
        size = preset.model.lower().rsplit("-", 2)[-2] if "-it" in preset.model.lower() else ""
        if size and f"-{size}-" in f"-{name}-":
            return key
    return DEFAULT_PRESET


def _int(values: dict[str, str], flag: str) -> int | None:
    """`flag`'s value as vLLM reads an integer (suffixes such as 8k, 1G), None when it is not given."""
    from mtpwatch.core.launch.memplan import PlanError, _parse_bytes

    if flag not in values:
        return None
    try:
        return _parse_bytes(values[flag])
    except (ValueError, PlanError):
        raise ServeArgsError(f"{flag}: not an integer: {values[flag]!r}") from None


def parse_serve_args(args: Sequence[str]) -> ServeArgs | None:
    """Read ``serve MODEL [flags]`` (or ``--model MODEL [flags]``); None when `args` is empty."""
    words = list(args)
    if not words:
        return None
    model: str | None = None
    if words[0] == "serve":
        words = words[1:]
        if words and not words[0].startswith("-"):
            model = words.pop(0)
    values: dict[str, str] = {}
    ignored: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        name, eq, val = word.partition("=")
        name = _flag_name(name)
        if not name.startswith("-"):
            raise ServeArgsError(f"unexpected argument {word!r} (expected `serve MODEL [vLLM flags]`)")
        if name in _VALUE_FLAGS:
            if not eq:
                if i + 1 >= len(words):
                    raise ServeArgsError(f"{name} needs a value")
                val = words[i + 1]
                i += 1
            values[name] = val
        elif name in _BOOL_FLAGS or eq or i + 1 >= len(words) or words[i + 1].startswith("-"):
            ignored.append(word)
        else:
            ignored.extend([word, words[i + 1]])
            i += 1
        i += 1
    model = values.get("--model", model)
    if not model:
        raise ServeArgsError("no model: give `serve MODEL` or --model MODEL")
    spec: dict[str, Any] | None = None
    if "--speculative-config" in values:
        try:
            parsed = json.loads(values["--speculative-config"])
        except json.JSONDecodeError as exc:
            raise ServeArgsError(f"--speculative-config is not valid JSON: {exc.msg}") from None
        if not isinstance(parsed, dict):
            raise ServeArgsError("--speculative-config must be a JSON object")
        spec = parsed
    util = None
    if "--gpu-memory-utilization" in values:
        try:
            util = float(values["--gpu-memory-utilization"])
        except ValueError:
            raise ServeArgsError("--gpu-memory-utilization: not a number") from None
        if not 0.0 < util <= 1.0:
            raise ServeArgsError(f"--gpu-memory-utilization must be in (0, 1], got {util}")
    kv, mml = _int(values, "--kv-cache-memory-bytes"), _int(values, "--max-model-len")
    eager = any(_flag_name(word.partition("=")[0]) == "--enforce-eager" for word in ignored)  # logged, read
    return ServeArgs(model, spec, util, kv, mml, eager, tuple(ignored))


def served_method(spec: dict[str, Any] | None) -> str | None:
    """The method a ``--speculative-config`` runs, as vLLM picks it when it names none: the drafter's
    config.json found offline, else its name (``core.launch.specrule``, read in vLLM's
    `SpeculativeConfig`); None: the preset's. A named method is kept, as 0.34 keeps it."""
    if not spec:
        return None
    method, drafter = spec.get("method"), spec.get("model")
    if isinstance(method, str) or not isinstance(drafter, str):
        return method if isinstance(method, str) else None
    from mtpwatch.core.launch.specrule import name_method, read_drafter

    return read_drafter(drafter).declared or name_method(drafter)
