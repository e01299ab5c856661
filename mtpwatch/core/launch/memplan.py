"""Memory plan for the vLLM servers mtpwatch launches on one GPU: do they fit, and with which flags.

vLLM 0.32 and 0.33 check at start-up that the device's free memory is at least
``gpu_memory_utilization × total`` (``vllm/v1/worker/utils.py``, 0.33 :761-770; default
utilisation 0.92, ``vllm/config/cache.py`` 0.32 :102, 0.33 :215) and then fill that share with
weights, activations, CUDA graphs and KV cache. So two servers on one GPU both start only when each
is given a share that the other leaves free: ``u_A × total + u_B × total ≤ free``. vLLM 0.34 sizes
the KV cache from measured memory with its extensible KV cache (the default on CUDA and ROCm where
the driver has VMM): the default share is then 1.0, else 0.92 (``cache.py`` :186, :216-233,
``resolved_gpu_memory_utilization`` :495-501), and the free-memory check is skipped, "the budget is
only a cap" (``utils.py`` :783-797). Twins that do not fit are then not refused at start; they fail
later or run short of KV cache. `MemoryRule` holds the version's default and check: the plan always
gives twins explicit shares, and where vLLM no longer checks, mtpwatch checks free memory itself
just before the twins, which start together, start (`free_now_refusal`). With
``--kv-cache-memory-bytes`` the KV cache is sized directly and the server holds weights + overheads
+ that KV, but the start-up check on ``gpu_memory_utilization`` still applies (0.32/0.33).

What a server needs is estimated offline, not measured (`memneeds`; overheads: `OVERHEAD_*`). The
plan is pure: the GPU's total/free memory comes in as a `GpuMemory` (see `gpumem` for reading it)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from mtpwatch.core.jsonout import JsonFields, key

GIB = float(2**30)
DEFAULT_UTILIZATION = 0.92
"""vLLM's default ``--gpu-memory-utilization`` without the extensible KV cache (0.34
``CacheConfig.DEFAULT_GPU_MEMORY_UTILIZATION``; see above); the most the plan gives one server."""
GB10_TOTAL_SHARE = 0.85
"""The most a plan gives all servers together on a GB10 (DGX Spark). vllm-project/recipes#632
(merged 2026-07-13, the Nemotron-3-Super NVFP4 recipe on one DGX Spark): "--gpu-memory-utilization
0.85 is required — GB10's unified memory can't satisfy vLLM's default 0.92 and OOMs at startup".
Read in the pull request's description and diff as a code-search index stores them (one model's
recipe, not a measured bound for every model); the plan stays at or below it."""
OVERHEAD_FIXED = 1.5 * GIB
"""CUDA context, NCCL/cuBLAS workspaces, sampler buffers: memory vLLM uses outside its weights/KV."""
OVERHEAD_GRAPHS = 1.0 * GIB
"""CUDA graph capture (0 with ``--enforce-eager``); vLLM logs 0.3–1.5 GiB for Gemma-sized models."""
ACTIVATION_TOKENS = 8192
"""Tokens of vLLM's profiling forward pass (``max_num_batched_tokens`` default for serving)."""
MARGIN_FRACTION = 0.03
"""Free memory the plan leaves untouched (others allocate while a server loads)."""
MARGIN_MIN = 1.0 * GIB

Schedule = Literal["alternate", "restart"]


@dataclass(frozen=True, slots=True)
class MemoryRule:
    """How the installed vLLM sizes a server's share and whether it refuses one that is not free."""

    name: str
    default_utilization: float
    """The share a server takes without ``--gpu-memory-utilization``."""
    checks_free: bool
    """vLLM refuses to start when ``utilization × total`` is not free (0.32/0.33; 0.34 without the
    extensible KV cache)."""

    def note(self) -> str:
        if self.checks_free:
            return (
                f"{self.name}: default share {self.default_utilization:g}; refuses to start when its "
                "share is not free"
            )
        return (
            f"{self.name}: default share 1.0 with the extensible KV cache (else 0.92), and no start-up "
            "check that the share is free (vllm/v1/worker/utils.py): every server gets an explicit "
            "share, and mtpwatch checks that the shares fit the free memory (when planning, and "
            "again as read just before twins start together)"
        )


RULE_PRE_034 = MemoryRule("vLLM 0.32/0.33", DEFAULT_UTILIZATION, checks_free=True)
RULE_034 = MemoryRule("vLLM 0.34", 1.0, checks_free=False)


def memory_rule(release: tuple[int, int] | None) -> MemoryRule:
    """The rule of a vLLM (major, minor); unknown: 0.34's, under which nothing refuses a share."""
    if release is not None and release < (0, 34):
        return RULE_PRE_034
    return RULE_034


class PlanError(ValueError):
    """A plan that cannot work; the message carries the numbers (one line)."""


class NoGpuMemoryError(PlanError):
    """Servers that would share one GPU, and no GPU memory to plan their shares against."""


def fmt_gib(n: float) -> str:
    """Bytes as GiB with two decimals, as vLLM's `format_gib` prints them."""
    return f"{n / GIB:.2f}"


@dataclass(frozen=True, slots=True)
class GpuMemory(JsonFields):
    """The device the servers will share: its memory as vLLM will see it at start-up."""

    name: str
    total_bytes: float = field(metadata=key("total_gib", per=GIB, nd=2))
    free_bytes: float = field(metadata=key("free_gib", per=GIB, nd=2))
    source: str
    """Where the figures come from: 'nvml', '/proc/meminfo (unified memory)', 'table: …', 'override'."""
    unified: bool = False
    """CPU and GPU share the memory (GB10): the OS and every process count against 'free'."""


@dataclass(frozen=True, slots=True)
class ServerNeed(JsonFields):
    """What one server needs, by part (bytes; GiB in its JSON)."""

    JSON_KEYS = "weights drafter kv overhead total max_model_len source drafter_uncounted"
    JSON_PROPS = {"total": key("total_gib", per=GIB, nd=2)}

    weights: float = field(metadata=key("weights_gib", per=GIB, nd=2))
    drafter: float = field(default=0.0, metadata=key("drafter_gib", per=GIB, nd=2))
    """Drafter weights (MTP assistant, EAGLE head, draft model); 0 for ngram or the target's own heads."""
    kv: float = field(default=0.0, metadata=key("kv_gib", per=GIB, nd=2))
    """KV cache for one `max_model_len` sequence (target + a drafter that keeps its own cache)."""
    overhead: float = field(
        default=OVERHEAD_FIXED + OVERHEAD_GRAPHS, metadata=key("overhead_gib", per=GIB, nd=2)
    )
    """Activations, CUDA graphs, CUDA context."""
    max_model_len: int | None = None
    source: str = ""
    """How the weights were found ('checkpoint', 'config × dtype', …)."""
    drafter_uncounted: str | None = None
    """Why the drafter is not in the sum (its size unknown offline): said on the plan line."""

    @property
    def total(self) -> float:
        return self.weights + self.drafter + self.kv + self.overhead


_VALUE_FLAGS = ("--gpu-memory-utilization", "--kv-cache-memory-bytes", "--max-model-len")


@dataclass(frozen=True, slots=True)
class MemoryFlags:
    """The memory flags a user gave one server (they always win over the plan's)."""

    gpu_memory_utilization: float | None = None
    kv_cache_memory_bytes: int | None = None
    max_model_len: int | None = None
    enforce_eager: bool = False

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> MemoryFlags:
        """Read the flags from a vLLM argument list (``--flag value`` or ``--flag=value``); raises
        `PlanError` for a value that is not a number."""
        values: dict[str, str] = {}
        eager = False
        args = list(argv)
        for i, arg in enumerate(args):
            name, eq, val = arg.partition("=")
            if name in _VALUE_FLAGS:
                if not eq and i + 1 >= len(args):
                    raise PlanError(f"{name} needs a value")
                values[name] = val if eq else args[i + 1]
            elif name == "--enforce-eager":
                eager = True
        util_s, kv_s, mml_s = (values.get(flag) for flag in _VALUE_FLAGS)
        try:
            util = None if util_s is None else float(util_s)
            kv = None if kv_s is None else _parse_bytes(kv_s)
            mml = None if mml_s is None else _parse_bytes(mml_s)
        except ValueError as exc:
            raise PlanError(str(exc)) from None
        if util is not None and not 0.0 < util <= 1.0:
            raise PlanError(f"--gpu-memory-utilization must be in (0, 1], got {util}")
        return cls(util, kv, mml, eager)

    @property
    def sized(self) -> bool:
        """The user's own flags size this server (a share, or the KV cache's bytes)."""
        return self.gpu_memory_utilization is not None or self.kv_cache_memory_bytes is not None


def _parse_bytes(text: str) -> int:
    """vLLM's human-readable integers: 8192, 8k, 1M, 4G (decimal), 4GiB-style 'Ki/Mi/Gi' binary."""
    units = {"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "ki": 2**10, "mi": 2**20, "gi": 2**30, "ti": 2**40}
    low = text.strip().lower().removesuffix("b")
    for suffix in sorted(units, key=len, reverse=True):
        if low.endswith(suffix):
            try:
                return int(float(low[: -len(suffix)]) * units[suffix])
            except ValueError:
                break
    try:
        return int(float(low))
    except ValueError:
        raise ValueError(f"not a number: {text!r}") from None


@dataclass(frozen=True, slots=True)
class ServerPlan(JsonFields):
    JSON_KEYS = "label utilization kv_cache_memory_bytes added_flags user_set need"

    label: str
    need: ServerNeed | None
    """None when the model's size is unknown (then the user's flags must size it)."""
    utilization: float | None = field(metadata=key("gpu_memory_utilization"))
    """The ``--gpu-memory-utilization`` the server starts with (None: no GPU planned)."""
    kv_cache_memory_bytes: int | None = None
    added_flags: tuple[str, ...] = ()
    """Flags the plan adds to the server's command line (nothing when the user gave them)."""
    user_set: bool = False
    """The user's own flag decided this server's share."""

    def asks(self, total: float, default: float = DEFAULT_UTILIZATION) -> float:
        """Bytes vLLM's start-up check requires free (``utilization × total``; `default`: vLLM's share
        without the flag)."""
        return math.ceil(total * (self.utilization or default))

    def takes(self, total: float) -> float:
        """Bytes the running server holds: its whole share, or weights + overheads + a fixed KV."""
        if self.kv_cache_memory_bytes is not None and self.need is not None:
            return self.need.weights + self.need.drafter + self.need.overhead + self.kv_cache_memory_bytes
        return self.asks(total)

    def to_json(self, total: float | None = None) -> dict[str, Any]:
        """Its fields, and with a planned GPU's `total` the GiB it asks and takes of it."""
        out = JsonFields.to_json(self)
        if total is not None:
            out["asks_gib"] = round(self.asks(total) / GIB, 2)
            out["takes_gib"] = round(self.takes(total) / GIB, 2)
        return out


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """Every server's share, the schedule (both up at once, or one at a time) and why."""

    gpu: GpuMemory | None
    servers: tuple[ServerPlan, ...]
    schedule: Schedule
    why: str
    rule: MemoryRule = RULE_034
    """The installed vLLM's default share and start-up check the plan followed."""

    def to_json(self) -> dict[str, Any]:
        total = self.gpu.total_bytes if self.gpu else None
        return {
            "gpu": self.gpu.to_json() if self.gpu else None,
            "schedule": self.schedule,
            "why": self.why,
            "servers": [s.to_json(total) for s in self.servers],
            "notes": [self.rule.note()],
        }

    def lines(self) -> list[str]:
        """The plan for a terminal, one fact per line."""
        out: list[str] = []
        if self.gpu is None:
            out.append("GPU: none found — memory not planned")
        else:
            g = self.gpu
            kind = ", unified with the CPU" if g.unified else ""
            out.append(
                f"GPU: {g.name}: {fmt_gib(g.total_bytes)} GiB total, {fmt_gib(g.free_bytes)} GiB free "
                f"({g.source}{kind})"
            )
        for s in self.servers:
            parts = [f"{s.label}:"]
            if s.need is not None:
                n = s.need
                parts.append(
                    f"needs {fmt_gib(n.total)} GiB = weights {fmt_gib(n.weights)}"
                    + (f" + drafter {fmt_gib(n.drafter)}" if n.drafter else "")
                    + f" + KV {fmt_gib(n.kv)} ({n.max_model_len} tokens) + overheads {fmt_gib(n.overhead)}"
                    + (f"; {n.drafter_uncounted}" if n.drafter_uncounted else "")
                )
            else:
                parts.append("size unknown")
            if self.gpu is not None and s.utilization is not None:
                who = "yours" if s.user_set else "planned"
                total = self.gpu.total_bytes
                parts.append(
                    f"→ --gpu-memory-utilization {s.utilization:g} ({who}: asks {fmt_gib(s.asks(total))}"
                    f" GiB, holds {fmt_gib(s.takes(total))} GiB)"
                )
            out.append(" ".join(parts))
        out.append(f"schedule: {self.schedule} — {self.why}")
        out.append(f"note: {self.rule.note()}")
        return out


def _margin(gpu: GpuMemory) -> float:
    return max(MARGIN_MIN, MARGIN_FRACTION * gpu.total_bytes)


def _floor2(x: float) -> float:
    return math.floor(x * 100 + 1e-9) / 100


def _ceil2(x: float) -> float:
    return math.ceil(x * 100 - 1e-9) / 100


def _with_user(label: str, need: ServerNeed | None, flags: MemoryFlags, total: float) -> ServerPlan:
    """A server sized by the user's own flags (utilisation and/or KV bytes)."""
    util = flags.gpu_memory_utilization
    added: tuple[str, ...] = ()
    if util is None:
        # Only --kv-cache-memory-bytes: the start-up check still asks for utilisation × total,
        # so ask for no more than the server will hold.
        assert flags.kv_cache_memory_bytes is not None
        held = (need.weights + need.drafter + need.overhead if need else 0.0) + flags.kv_cache_memory_bytes
        util = min(DEFAULT_UTILIZATION, max(0.01, _ceil2(held / total)))
        added = ("--gpu-memory-utilization", f"{util:g}")
    return ServerPlan(label, need, util, flags.kv_cache_memory_bytes, added, user_set=True)


def plan_memory(
    gpu: GpuMemory | None,
    servers: Sequence[tuple[str, ServerNeed | None, MemoryFlags]],
    *,
    together: bool = True,
    restart_allowed: bool = True,
    rule: MemoryRule = RULE_034,
) -> MemoryPlan:
    """Give each of `servers` (label, need, the user's memory flags; in start order) a share of `gpu`
    (None: none found or named, nothing is planned), or choose the restart schedule, or refuse.
    `together`: the servers run at the same time (A/B twins), else one at a time; `restart_allowed`:
    twins that cannot fit together may run one at a time; `rule`: the installed vLLM's default share
    and start-up check (`memory_rule`). Raises `PlanError` when a server cannot fit even alone or the
    user's flags ask for more than is free, `NoGpuMemoryError` when there is no `gpu`, several servers
    run `together` and not each has the user's own ``--gpu-memory-utilization`` (vLLM's default
    share each cannot both start)."""
    if gpu is None:
        return _unplanned(servers, together, rule)
    total, usable = gpu.total_bytes, _usable(gpu)
    free_s = f"{fmt_gib(gpu.free_bytes)} GiB free of {fmt_gib(gpu.total_bytes)}"
    _check_each_fits(gpu, servers, usable, free_s, rule)
    if not together or len(servers) < 2:
        why = "one server at a time" if len(servers) > 1 else "one server"
        schedule: Schedule = "restart" if len(servers) > 1 else "alternate"
        return MemoryPlan(gpu, _alone(servers, total, usable), schedule, why, rule=rule)
    plans, wanted = _together(gpu, servers, total, usable)
    if plans is not None:
        shares = " + ".join(f"{p.utilization:g}" for p in plans)
        why = f"both fit at once ({shares} of {fmt_gib(total)} GiB; {free_s}{_gb10_words(gpu)})"
        return MemoryPlan(gpu, tuple(plans), "alternate", why, rule=rule)
    yours = any(flags.sized for _, _, flags in servers)
    said = " (your --gpu-memory-utilization/--kv-cache-memory-bytes)" if yours else ""
    reason = f"both at once need {fmt_gib(wanted)} GiB{said} but the GPU has {free_s}"
    if not restart_allowed:
        raise PlanError(f"{reason}; use the restart schedule (one server at a time) or smaller shares")
    return MemoryPlan(gpu, _alone(servers, total, usable), "restart", f"{reason}: one server at a time", rule)


def is_gb10(gpu: GpuMemory) -> bool:
    """A DGX Spark's GB10 (unified memory): its plans keep to `GB10_TOTAL_SHARE`."""
    return gpu.unified and "GB10" in gpu.name.upper()


def _usable(gpu: GpuMemory) -> float:
    """What the plan may hand out: free memory less the margin, and on a GB10 at most 0.85 of it all."""
    usable = gpu.free_bytes - _margin(gpu)
    return min(usable, GB10_TOTAL_SHARE * gpu.total_bytes) if is_gb10(gpu) else usable


def _gb10_words(gpu: GpuMemory) -> str:
    return f"; GB10: {GB10_TOTAL_SHARE:g} in all at most, vllm-project/recipes#632" if is_gb10(gpu) else ""


_Servers = Sequence[tuple[str, ServerNeed | None, MemoryFlags]]


def _unplanned(servers: _Servers, together: bool, rule: MemoryRule) -> MemoryPlan:
    """No GPU to plan for: the user's shares as given; twins need one each."""
    sized = all(flags.gpu_memory_utilization is not None for _, _, flags in servers)
    if together and len(servers) > 1 and not sized:
        raise NoGpuMemoryError(
            "no GPU memory known here (NVML and nvidia-smi read none), so the twins cannot be given shares "
            "of one GPU and the second would not start: give --gpu NAME (a GPU of the table, e.g. GB10), "
            "--gpu-memory GIB, or --restart (one server at a time)"
        )
    bare = tuple(ServerPlan(label, need, flags.gpu_memory_utilization) for label, need, flags in servers)
    why = "no GPU to plan for"
    if together and len(servers) > 1:
        why += "; the shares are your --gpu-memory-utilization"
    return MemoryPlan(None, bare, "alternate" if together else "restart", why, rule)


def _check_each_fits(gpu: GpuMemory, servers: _Servers, usable: float, free_s: str, rule: MemoryRule) -> None:
    """Alone: every server must fit the free memory by itself, and the user's share too (where vLLM
    does not refuse a share that is not free, mtpwatch does)."""
    outcome = (
        "vLLM would refuse to start"
        if rule.checks_free
        else f"{rule.name} would not check it and run short of memory, so mtpwatch refuses"
    )
    total = gpu.total_bytes
    for label, need, flags in servers:
        if need is not None and need.total > usable:
            raise PlanError(
                f"{label} needs {fmt_gib(need.total)} GiB (weights {fmt_gib(need.weights + need.drafter)}, "
                f"KV {fmt_gib(need.kv)}, overheads {fmt_gib(need.overhead)}) but the GPU has {free_s} "
                f"(keeping {fmt_gib(_margin(gpu))} GiB spare): lower --max-model-len, quantise, or use a "
                "bigger GPU"
            )
        if flags.gpu_memory_utilization is not None and flags.gpu_memory_utilization * total > gpu.free_bytes:
            raise PlanError(
                f"{label}: --gpu-memory-utilization {flags.gpu_memory_utilization:g} asks for "
                f"{fmt_gib(flags.gpu_memory_utilization * total)} GiB but the GPU has {free_s}; {outcome}"
            )
        if need is None and not flags.sized:
            raise PlanError(
                f"{label}: the model's size is unknown (no config.json found offline), so no memory "
                "share can be planned; give --gpu-memory-utilization for it"
            )


def _alone(servers: _Servers, total: float, usable: float) -> tuple[ServerPlan, ...]:
    """One server at a time: each its own share of what is free (the user's where given)."""
    out = []
    for label, need, flags in servers:
        if flags.sized:
            out.append(_with_user(label, need, flags, total))
            continue
        util = min(DEFAULT_UTILIZATION, _floor2(usable / total))
        if need is not None and util * total < need.total:
            util = _ceil2(need.total / total)  # above vLLM's default, still within what is free
        out.append(ServerPlan(label, need, util, None, ("--gpu-memory-utilization", f"{util:g}")))
    return tuple(out)


def _together(
    gpu: GpuMemory, servers: _Servers, total: float, usable: float
) -> tuple[list[ServerPlan] | None, float]:
    """Together: the user's shares are fixed; the rest split what is left. (The plans, or None when
    they do not fit; the bytes both need.)"""
    fixed = [_with_user(label, need, flags, total) for label, need, flags in servers if flags.sized]
    fixed_by_label = {p.label: p for p in fixed}
    fixed_held = sum(p.takes(total) for p in fixed)
    open_ = [(label, need) for label, need, flags in servers if label not in fixed_by_label]
    open_need = sum(need.total for _, need in open_ if need is not None)
    left = usable - fixed_held
    wanted = fixed_held + open_need
    if left < open_need:
        return None, wanted
    plans: list[ServerPlan] = []
    extra = (left - open_need) / max(1, len(open_))
    for label, need, _flags in servers:
        if label in fixed_by_label:
            plans.append(fixed_by_label[label])
            continue
        assert need is not None
        util = _floor2((need.total + extra) / total)
        if util * total < need.total:
            util = _ceil2(need.total / total)
        util = min(util, DEFAULT_UTILIZATION)
        plans.append(ServerPlan(label, need, util, None, ("--gpu-memory-utilization", f"{util:g}")))
    # vLLM checks each start against what is free then: the later ones see less.
    held = 0.0
    for p in plans:
        if p.asks(total) > gpu.free_bytes - held:
            return None, wanted
        held += p.takes(total)
    return plans, wanted


def free_now_refusal(plan: MemoryPlan, live: GpuMemory | None) -> str | None:
    """mtpwatch's own start-up check where vLLM makes none (see the module docstring): twins about to
    start together whose shares of the GPU as read now (`live`) are more than it has free. One line,
    or None: they fit, vLLM checks itself, nothing was read, or the servers take turns."""
    if plan.rule.checks_free or live is None or plan.schedule != "alternate" or len(plan.servers) < 2:
        return None
    asked = sum(s.asks(live.total_bytes, plan.rule.default_utilization) for s in plan.servers)
    if asked <= live.free_bytes:
        return None
    shares = " + ".join(f"{s.utilization or plan.rule.default_utilization:g}" for s in plan.servers)
    return (
        f"the twins' shares ({shares} of {fmt_gib(live.total_bytes)} GiB) ask {fmt_gib(asked)} GiB but "
        f"the GPU has {fmt_gib(live.free_bytes)} GiB free now ({live.source}); {plan.rule.name} would start "
        "both and run short of memory instead of refusing: free memory, give smaller shares, or use --restart"
    )
