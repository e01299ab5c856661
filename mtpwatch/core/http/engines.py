"""What differs between the engines behind the same HTTP API: vLLM and llama.cpp's `llama-server`.

Both serve `/v1/completions`, `/v1/models`, `/health` and Prometheus `/metrics` with the same four
`spec_decode_*` counters (llama.cpp PR 26389 copied vLLM's names under `llamacpp:`). This module holds
every other difference, so the client, the monitor and the bench stay engine-neutral:

- which engine it is: the metrics schema (`vllm:` or `llamacpp:` families) or `/props` (llama.cpp);
- `/v1/models`: either shape is read (`parse_model_list`);
- per-chunk token counts: vLLM's `stream_options.continuous_usage_stats`; llama-server ignores it but
  sends its `timings` (with the cumulative `predicted_n`) on every chunk when asked for
  `timings_per_token` (`stream_extras`);
- the final chunk: both send `usage`; llama-server adds `timings` (when it drafted, `draft_n` /
  `draft_n_accepted` for exactly this request) (`LlamaTimings`);
- what llama-server's `/metrics` lacks: `model_name` and `engine` labels, latency histograms
  (TTFT, ITL, TPOT), a KV-cache gauge, `_created` timestamps; and it stops a draft early (draft
  model unsure, n-gram miss), so draft tokens ≠ drafts × k and the number of `position` labels is
  `--spec-draft-n-max`, not a fixed k (`ENGINE_NOTES`, `draft_note`). It also adds a request's counts
  to `/metrics` only when the request finishes (tools/server/server-context.cpp:
  `metrics_on_prediction` runs when a slot is released).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from mtpwatch.core.metrics import formulas as F
from mtpwatch.core.metrics.engines import Engine


def stream_extras(engine: Engine) -> dict[str, Any]:
    """Request-body fields that make `engine` send exact per-chunk token counts (module docstring);
    sent only to a server known to be llama.cpp: other servers may reject unknown fields."""
    return {"timings_per_token": True} if engine == "llama.cpp" else {}


def draft_note(engine: Engine, k: int | None, draft_tokens: float, drafts: float) -> str:
    """How long drafts were (module docstring): '' for vLLM (always k); llama.cpp: 'drafts ≤ 4, mean 3.85'."""
    if engine != "llama.cpp" or not k:
        return ""
    if drafts <= 0:
        return f"drafts ≤ {k} tokens (variable)"
    return f"drafts ≤ {k}, mean {draft_tokens / drafts:.2f} tokens"


@dataclass(frozen=True, slots=True)
class ModelEntry:
    """One served model as either engine lists it."""

    id: str
    """The name requests use (vLLM's served model name; llama-server's `--alias`, else its path)."""
    root: str | None = None
    """Where it was loaded from (vLLM `root`; llama-server: the GGUF path, when it says)."""
    max_model_len: int | None = None
    """Context length (vLLM `max_model_len`; llama-server `meta.n_ctx`)."""
    parent: str | None = None
    """Base model of a LoRA adapter (vLLM)."""


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def parse_model_list(obj: Any) -> list[ModelEntry]:
    """`GET /v1/models` of vLLM (`data[].id`) or llama-server (`data[].id`, or only `models[].name`).
    Raises ValueError for neither shape (the caller turns it into one line)."""
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    data = obj.get("data")
    if isinstance(data, list) and data:
        out = []
        for entry in data:
            if not isinstance(entry, dict) or "id" not in entry:
                raise ValueError("a data[] entry without an id")
            raw_meta = entry.get("meta")
            meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
            out.append(
                ModelEntry(
                    id=str(entry["id"]),
                    root=_str_or_none(entry.get("root")),
                    max_model_len=_int_or_none(entry.get("max_model_len")) or _int_or_none(meta.get("n_ctx")),
                    parent=_str_or_none(entry.get("parent")),
                )
            )
        return out
    models = obj.get("models")
    if isinstance(models, list):
        out = []
        for entry in models:
            if not isinstance(entry, dict):
                raise ValueError("a models[] entry that is not an object")
            name = entry.get("name") or entry.get("model")
            if not isinstance(name, str) or not name:
                raise ValueError("a models[] entry without a name")
            out.append(ModelEntry(id=name, root=_str_or_none(entry.get("model"))))
        return out
    if isinstance(data, list):
        return []
    raise ValueError("no data[] or models[] list")


@dataclass(frozen=True, slots=True)
class EngineInfo:
    """What llama-server's `/props` says about itself (vLLM has no `/props`)."""

    engine: Engine
    build: str | None = None
    """llama.cpp `build_info`, e.g. 'b11434-unknown'."""
    spec_types: str | None = None
    """The speculation types slot 0 runs with ('draft-simple', 'ngram-mod', …; /slots), without 'none'."""
    speculative: bool | None = None
    """Slot 0 drafts (/slots `speculative`); None when /slots is off (`--no-slots`)."""
    synthetic: str | None = None
    """A /props or /slots key naming synthetic acceptance, with its value (`props_synthetic`)."""


def _spec_types(value: Any) -> str | None:
    # 'none,draft-simple' → 'draft-simple'; 'none' → ''
    if not isinstance(value, str):
        return None
    return ",".join(t for t in value.split(",") if t.strip() and t.strip() != "none")


def props_synthetic(obj: Any) -> str | None:
    """'speculative.synthetic_acceptance_length=2.5' when /props or a slot's params hold a key that
    names synthetic acceptance (llama.cpp#27711) with a value set; None otherwise. The key's exact
    name is not confirmed (`core.sweeps.engine.LLAMACPP_SYNTHETIC_FLAGS` says why), so any spelling of
    "synthetic acceptance" (words joined by -, _ or .) counts, and an empty, null, zero or "none"
    value does not."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            name = "".join(c for c in str(key).lower() if c not in "-_.")
            unset = value in (None, 0, "", [], "none", "off") or value is False
            if "syntheticacceptance" in name and not unset and not isinstance(value, dict | list):
                return f"{key}={value}"
            found = props_synthetic(value)
            if found:
                return found
    elif isinstance(obj, list):
        return next((f for f in map(props_synthetic, obj) if f), None)
    return None


def parse_props(obj: Any, slots: Any = None) -> EngineInfo | None:
    """llama-server's `GET /props` (and `GET /slots`) → `EngineInfo`; None when `obj` is no /props page.
    /props' default generation settings say `speculative.types: none` even on a server that drafts;
    slot 0 of /slots says what it runs with (`speculative`, `params["speculative.types"]`)."""
    if not isinstance(obj, dict) or "default_generation_settings" not in obj:
        return None
    spec: str | None = None
    speculative: bool | None = None
    slot = slots[0] if isinstance(slots, list) and slots and isinstance(slots[0], dict) else None
    if slot is not None:
        flag = slot.get("speculative")
        speculative = flag if isinstance(flag, bool) else None
        params = slot.get("params")
        spec = _spec_types(params.get("speculative.types")) if isinstance(params, dict) else None
    return EngineInfo(
        engine="llama.cpp",
        build=_str_or_none(obj.get("build_info")) or None,
        spec_types=spec or None,
        speculative=speculative,
        synthetic=props_synthetic(obj) or props_synthetic(slot),
    )


async def identify(get_json: Callable[[str], Awaitable[Any]]) -> EngineInfo | None:
    """Ask a server whether it is llama-server (`get_json` = `VllmClient.get_json`); None for vLLM."""
    props = await get_json("/props")
    if not isinstance(props, dict) or "default_generation_settings" not in props:
        return None
    return parse_props(props, await get_json("/slots"))


@dataclass(frozen=True, slots=True)
class LlamaTimings:
    """llama-server's `timings` object (final chunk; every chunk with `timings_per_token`)."""

    predicted_n: int
    """Tokens generated so far (the final chunk: all of them)."""
    draft_n: int | None = None
    """Draft tokens proposed for this request (only when it drafted)."""
    draft_n_accepted: int | None = None
    """Draft tokens of this request the target accepted."""

    @property
    def acceptance_rate(self) -> float | None:
        """This request's draft_n_accepted / draft_n (`formulas.acceptance_rate`, one request)."""
        if self.draft_n is None or self.draft_n_accepted is None:
            return None
        return F.acceptance_rate(self.draft_n_accepted, self.draft_n)

    @classmethod
    def from_json(cls, obj: Any) -> LlamaTimings | None:
        """Read a `timings` object; None when absent or without `predicted_n`."""
        if not isinstance(obj, dict):
            return None
        n = _int_or_none(obj.get("predicted_n"))
        if n is None:
            return None
        return cls(n, _int_or_none(obj.get("draft_n")), _int_or_none(obj.get("draft_n_accepted")))
