"""What the engine really runs, and which of mtpwatch's advice and checks still hold under it.

The k advisor rests on the truncation rule (a run at k predicts every k' ≤ k: `advisor`) and, as the
lossless check (`lossless`) does, on vLLM's lossless verification (an accepted draft is the token
the target would have produced). Several engine modes break one or both. This module reads the
speculative config (`mtpwatch start`'s or the bench's own command line, else the method and k the
start-up log and `/metrics` said) and the vLLM version, and names each mode with what it means for
the advice and for the lossless check.

Field names are vLLM's `SpeculativeConfig` (vllm/config/speculative.py, 0.32/0.33):

- `method`: "dflash" and "dspark" are block drafters: `num_speculative_tokens` is the block the
  drafter was trained to propose in one pass (DSpark checks that it equals the trained
  `block_size`); a run at k says nothing about a smaller block;
- `rejection_sample_method`: "standard" (lossless), "block" (block verification, Sun et al.:
  lossless, accepts at least as much), "synthetic" (acceptance drawn from
  `synthetic_acceptance_rates` / `synthetic_acceptance_length`: a benchmarking mode, outputs are
  not the target's), "fly" (FLy, vLLM 0.33: an isolated rejection at a high-entropy position is
  overridden when the next `fly_window_size` drafts agree — lossy by design);
- `num_speculative_tokens_per_batch_size`: k by the number of running requests (`schedule`);
- `enable_adaptive_verification`: the verify budget follows per-request confidence (DSpark only);
- `parallel_drafting`: all drafts in one drafter pass (the drafter's cost is not per position).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mtpwatch.core.jsonout import JsonFields

#: Methods whose `num_speculative_tokens` is a block size, not a chain length.
BLOCK_DRAFTERS = frozenset({"dflash", "dspark"})
#: `rejection_sample_method` values that keep the target's distribution.
LOSSLESS_VERIFICATION = frozenset({"standard", "block"})
#: The first vLLM release whose `SpeculativeConfig` has `num_speculative_tokens_per_batch_size`.
DYNAMIC_K_SINCE = (0, 32)
#: llama.cpp's benchmark-only synthetic acceptance (ggml-org/llama.cpp#27711, merged): "Expose[s]
#: mutually exclusive `--spec-synthetic-acceptance-length` and `--spec-synthetic-acceptance-rates`
#: options", a mean length turned into one conditional rate p with p + … + p^K = L − 1, "similar to
#: vLLM's benchmarking options". Confirmed from the PR's text only (llama.cpp's source after it could
#: not be read here): these two long flags. Not confirmed: short forms, environment variables, the
#: syntax of -rates' value, and what /props or /slots expose, so `core.http.engines.props_synthetic`
#: looks there only for a key that names synthetic acceptance and holds a value.
LLAMACPP_SYNTHETIC_FLAGS = ("--spec-synthetic-acceptance-length", "--spec-synthetic-acceptance-rates")


@dataclass(frozen=True, slots=True)
class EngineFlag(JsonFields):
    """One engine mode that changes what mtpwatch may claim."""

    name: str
    what: str
    advice: str
    """Which k advice still holds."""
    lossless: str
    """What the lossless check (outputs identical to k=0 at temperature 0) means here."""

    def line(self) -> str:
        return f"{self.name}: {self.what} — advice: {self.advice}; lossless check: {self.lossless}"


@dataclass(frozen=True, slots=True)
class EngineMode(JsonFields):
    """The speculative setup one server runs, as far as it is known."""

    JSON_KEYS = "method k vllm_version verification lossless truncation_holds schedule source flags"

    method: str | None
    k: int | None
    vllm_version: str | None
    verification: str | None
    """`rejection_sample_method` (None: not on the command line; vLLM's default is "standard")."""
    schedule: tuple[tuple[int, int, int], ...] | None
    flags: tuple[EngineFlag, ...]
    source: str
    """Where the config came from: 'command line', 'start-up log', '/metrics' or 'unknown'."""

    @property
    def truncation_holds(self) -> bool:
        """Whether a run at k predicts every k' ≤ k (no block drafter, no adaptive budget)."""
        return not any(f.name in ("block drafter", "adaptive verification") for f in self.flags)

    @property
    def lossless(self) -> bool | None:
        """True when verification keeps the target's distribution, False when not, None: unknown."""
        if self.verification is None:
            return None if self.source == "unknown" else True
        return self.verification in LOSSLESS_VERIFICATION

    @property
    def advice_withheld(self) -> bool:
        """No k advice at all: a block drafter's k is a block size, synthetic acceptance is made up."""
        return self.method in BLOCK_DRAFTERS or self.verification == "synthetic"

    def caveat(self) -> str | None:
        """One short phrase for a live view's advice line; None when nothing limits the advice."""
        parts: list[str] = []
        if not self.truncation_holds:
            if self.method in BLOCK_DRAFTERS:
                parts.append(f"{self.method}'s k is its block size: measure each k")
            else:
                parts.append("adaptive verification: late positions read low")
        if self.verification == "fly":
            parts.append("fly verification is lossy: outputs differ by design")
        elif self.verification == "synthetic":
            parts.append("synthetic acceptance: no k advice")
        if self.schedule:
            parts.append("k follows the batch size")
        return "; ".join(parts) or None

    def headline(self) -> str:
        """'ngram k=4 (vLLM 0.32.0, from the command line)'."""
        what = self.method or "speculation"
        if self.k is not None:
            what += f" k={self.k}" if not self.schedule else f" k≤{self.k}"
        if self.verification and self.verification != "standard":
            what += f", {self.verification} verification"
        version = f"vLLM {self.vllm_version}, " if self.vllm_version else ""
        return f"{what} ({version}from the {self.source})"


def parse_schedule(value: Any) -> tuple[tuple[int, int, int], ...] | None:
    """`num_speculative_tokens_per_batch_size` as integer triples; None when absent or malformed."""
    if not isinstance(value, Sequence) or isinstance(value, str) or not value:
        return None
    for entry in value:
        if not isinstance(entry, Sequence) or isinstance(entry, str) or len(entry) != 3:
            return None
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in entry):
            return None
    return tuple((lo, hi, k) for lo, hi, k in value)


def llamacpp_synthetic(argv: Sequence[str] | None, props_note: str | None = None) -> dict[str, Any] | None:
    """A speculative-config fragment for `engine_mode` when a llama-server runs synthetic acceptance:
    from its command line (`LLAMACPP_SYNTHETIC_FLAGS`), else from what /props or /slots said
    (`props_note`, `EngineInfo.synthetic`); None when neither says so."""
    args = list(argv or ())
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if flag in LLAMACPP_SYNTHETIC_FLAGS and (eq or i + 1 < len(args)):
            return _synthetic(f"{flag} {value if eq else args[i + 1]}")
    return _synthetic(f"/props {props_note}") if props_note else None


def _synthetic(where: str) -> dict[str, Any]:
    return {"rejection_sample_method": "synthetic", "synthetic_source": f"llama.cpp's {where}"}


def version_tuple(version: str | None) -> tuple[int, int] | None:
    """(major, minor) of a vLLM version string ('0.32.0', '0.33.1rc1+cpu'); None when unreadable."""
    m = re.match(r"v?(\d+)\.(\d+)", (version or "").strip())
    return (int(m.group(1)), int(m.group(2))) if m else None


def dynamic_k_missing(version: str | None) -> str | None:
    """Why this vLLM cannot run a batch-size schedule (one line), or None (it can, or the version
    is unknown: then only a run can tell)."""
    vt = version_tuple(version)
    if vt is not None and vt < DYNAMIC_K_SINCE:
        return f"vLLM {version} has no num_speculative_tokens_per_batch_size (dynamic k)"
    return None


def _flags(
    method: str | None,
    k: int | None,
    config: Mapping[str, Any],
    version: str | None,
    schedule: tuple[tuple[int, int, int], ...] | None,
) -> Iterator[EngineFlag]:
    if method in BLOCK_DRAFTERS:
        yield EngineFlag(
            "block drafter",
            f"{method} proposes a block in one pass; num_speculative_tokens={k} is the block size it "
            "was trained for, not a chain length",
            "a run at k does not predict a smaller k (the truncation rule fails): measure each k "
            "(bench --sweep-k), and keep the block size the drafter was trained with",
            "holds (verification is unchanged)",
        )
    verification = config.get("rejection_sample_method")  # vLLM's standard (lossless) one: no flag
    if verification == "fly":
        window = config.get("fly_window_size")
        yield EngineFlag(
            "fly verification (lossy)",
            "FLy accepts a rejected draft at a high-entropy position when the next "
            f"{window if isinstance(window, int) else 'fly_window_size'} drafts agree: acceptance is "
            "not strict agreement with the target",
            "speed advice holds for this engine, but acceptance and the best k are FLy's, not "
            "standard verification's",
            "outputs differing from k=0 are expected, not a bug",
        )
    elif verification == "synthetic":
        yield EngineFlag(
            "synthetic acceptance",
            "acceptance is drawn from "
            f"{config.get('synthetic_source') or 'synthetic_acceptance_rates/length'}, not from the drafter",
            "figures measure the engine at the configured acceptance, not your workload's; no k advice",
            "does not apply (outputs are not the target's)",
        )
    elif verification == "block":
        yield EngineFlag(
            "block verification",
            "the drafts are verified jointly (Sun et al.), accepting at least as many as standard",
            "holds",
            "holds (lossless)",
        )
    elif isinstance(verification, str) and verification not in LOSSLESS_VERIFICATION:
        yield EngineFlag(
            f"{verification} verification",
            "a rejection_sample_method mtpwatch does not know",
            "unknown",
            "unknown: differing outputs may be by design",
        )
    if schedule:
        ranges = ", ".join(f"{lo}–{hi}: k={kk}" for lo, hi, kk in schedule)
        missing = dynamic_k_missing(version)
        yield EngineFlag(
            "batch-size schedule",
            f"k follows the number of running requests ({ranges})" + (f"; {missing}" if missing else ""),
            "advice holds per concurrency only (bench --sweep-k … --concurrency …); per-position rates "
            "of late positions read low when steps ran at a smaller k",
            "holds (verification is unchanged)",
        )
    if config.get("enable_adaptive_verification") is True:
        yield EngineFlag(
            "adaptive verification",
            "the verify budget follows each request's confidence (dspark): steps verify fewer than k drafts",
            "approximate: late positions' rates read low, so the advisor under-rates a larger k",
            "holds (verification stays lossless)",
        )
    if config.get("parallel_drafting") is True:
        yield EngineFlag(
            "parallel drafting",
            "all drafts come from one drafter pass",
            "the drafter's cost is not per position: the step model's slope is the verify cost alone",
            "holds",
        )


def engine_mode(
    spec_config: Mapping[str, Any] | None,
    *,
    method: str | None = None,
    k: int | None = None,
    vllm_version: str | None = None,
    source: str | None = None,
) -> EngineMode:
    """The mode from a `--speculative-config` object (a `provenance.ArmInfo.spec_config`, its "from_log"
    entry what the start-up log said; or None) and what else is known: `k` (start-up log or /metrics)
    and `vllm_version` (/version or the log). The method the server ran (the log's, else `method`)
    wins over the command line's, which may be absent (vLLM detects it) or, before vLLM 0.34, rewritten
    by the drafter's name (`core.launch.specrule`). `source` defaults to 'command line' when a config
    is given, else 'start-up log' when method/k are, else 'unknown'."""
    raw = dict(spec_config or {})
    logged = raw.get("from_log")
    config = {key: v for key, v in raw.items() if key != "from_log"}
    cfg_k = config.get("num_speculative_tokens")
    ran = logged.get("method") if isinstance(logged, Mapping) else None
    method = next((m for m in (ran, method, config.get("method")) if isinstance(m, str)), None)
    if isinstance(cfg_k, int) and not isinstance(cfg_k, bool):
        k = cfg_k
    schedule = parse_schedule(config.get("num_speculative_tokens_per_batch_size"))
    if schedule and k is None:
        k = max(r[2] for r in schedule)
    where = source or ("command line" if config else "start-up log" if method or k else "unknown")
    verification = config.get("rejection_sample_method")
    return EngineMode(
        method=method,
        k=k,
        vllm_version=vllm_version,
        verification=verification if isinstance(verification, str) else None,
        schedule=schedule,
        flags=tuple(_flags(method, k, config, vllm_version, schedule)),
        source=where,
    )


def engine_mode_of_arm(info: Mapping[str, Any]) -> EngineMode:
    """The mode of one `meta.arms.<name>` object (a `provenance.ArmInfo.to_json()`)."""
    spec, method, k, version, argv = map(
        info.get, ("spec_config", "method", "k", "vllm_version", "launch_argv")
    )
    spec_map = spec if isinstance(spec, Mapping) else {}
    if not spec_map and isinstance(argv, list):
        spec_map = llamacpp_synthetic([str(a) for a in argv]) or {}
    known_k = k if isinstance(k, int) and not isinstance(k, bool) else None
    if set(spec_map) - {"from_log"}:
        source = "command line"
    elif "from_log" in spec_map:
        source = "start-up log"
    else:
        source = "/metrics" if known_k is not None else "unknown"
    return engine_mode(
        spec_map or None,
        method=method if isinstance(method, str) else None,
        k=known_k,
        vllm_version=version if isinstance(version, str) else None,
        source=source,
    )
