"""The `meta` block: what was measured, on what, with which flags, in every JSON mtpwatch writes.

A report read a month later must say where its numbers came from. `meta` holds:

- mtpwatch's version, the UTC time, the command line (secrets masked), the host name, Python;
- `label` and `metadata` (the user's `--label` and `--metadata KEY=VALUE`);
- per arm: URL, served model name, the model it was loaded from (`root` of /v1/models), the
  speculative method, k and drafter, vLLM's version (GET /version), the engine flags the server
  exposes (the labels of `vllm:cache_config_info`), and, when mtpwatch started the server, the
  speculative config from its command line and its start-up log;
- the GPU's name and peak bandwidth (NVML on this host, or the user's `--gpu`), with the source;
- the prompt set's name, size and a SHA-256 over its prompts (id, category, max_tokens, text).

Collection never fails a run: whatever cannot be read is None, with the reason under `errors`."""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import platform
import socket
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mtpwatch import __version__
from mtpwatch.core.http.urls import same_server
from mtpwatch.core.jsonout import JsonFields
from mtpwatch.core.launch.logparse import LogFacts
from mtpwatch.core.launch.servers import MASK, mask_argv, secret_name
from mtpwatch.core.roofline.gpus import UnknownGpuError, lookup_gpu
from mtpwatch.core.roofline.nvml import local_gpu_reading

SCHEMA = 1


class Prompt(Protocol):
    """What the prompt-set hash reads of a prompt (`core.ab.workloads.Prompt` has it)."""

    @property
    def id(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def category(self) -> str: ...
    @property
    def max_tokens(self) -> int: ...


def prompt_set_hash(prompts: Sequence[Prompt]) -> str:
    """'sha256:<hex>' over the prompts in order (id, category, max_tokens, text): same set, same hash."""
    h = hashlib.sha256()
    for p in prompts:
        line = json.dumps([p.id, p.category, p.max_tokens, p.text], ensure_ascii=False, separators=(",", ":"))
        h.update(line.encode("utf-8") + b"\n")
    return "sha256:" + h.hexdigest()


def prompt_set(name: str, prompts: Sequence[Prompt]) -> dict[str, Any]:
    """The `meta.prompt_set` object."""
    return {
        "name": name,
        "prompts": len(prompts),
        "categories": list(dict.fromkeys(p.category for p in prompts)),
        "hash": prompt_set_hash(prompts),
    }


def parse_metadata(pairs: Iterable[str]) -> dict[str, str]:
    """`--metadata KEY=VALUE` values as a dict; raises ValueError (one line) on a malformed one."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ValueError(f"expected KEY=VALUE, got {pair!r}")
        out[key] = MASK if secret_name(key) else value
    return out


SPEC_CONFIG_FLAGS = ("--speculative-config", "--speculative_config", "-sc")
"""The spellings of vLLM's speculative-config flag (each also as ``FLAG=JSON``)."""


def spec_config_from_argv(argv: Sequence[str]) -> dict[str, Any] | None:
    """The JSON of ``--speculative-config`` / ``-sc`` in a vLLM command line; None if absent or unreadable."""
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if flag not in SPEC_CONFIG_FLAGS or not (eq or i + 1 < len(argv)):
            continue
        try:
            parsed = json.loads(value if eq else argv[i + 1])
        except json.JSONDecodeError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


@dataclass(slots=True)
class ArmInfo(JsonFields):
    """What is known about one arm's server."""

    url: str
    served_name: str | None = None
    model: str | None = None
    """What the server loaded (`root` of /v1/models), else the served name."""
    method: str | None = None
    k: int | None = None
    drafter: str | None = None
    speculative: bool | None = None
    """Whether /metrics shows speculative-decoding counters."""
    vllm_version: str | None = None
    engine: dict[str, str] = field(default_factory=dict)
    """Labels of `vllm:cache_config_info` (block size, prefix caching, gpu_memory_utilization, …)."""
    max_model_len: int | None = None
    launch_argv: list[str] | None = None
    """The (masked) command line mtpwatch started the server with; None when it was running already."""
    spec_config: dict[str, Any] | None = None
    """The speculative config from the command line and start-up log (servers mtpwatch started)."""
    server_gpu: dict[str, Any] | None = None
    """The GPU the server itself reports, `{"name", "peak_gbps"}`: only the simulator does (its
    /sim/info models one); None for a real vLLM, which serves no such page."""
    errors: list[str] = field(default_factory=list)


def first_line(exc: BaseException) -> str:
    """An error as one line: its message's first line, else its type's name."""
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__


@contextlib.contextmanager
def _noted(errors: list[str], where: str) -> Iterator[None]:
    """What the block raises goes to `errors` as 'where: first line' (collection never fails)."""
    try:
        yield
    except Exception as exc:
        errors.append(f"{where}: {first_line(exc)}")


async def probe_arm(client: Any, model: str | None = None) -> ArmInfo:
    """Ask a running server (a `core.http.client.VllmClient`) what it is; never raises. `model` picks
    the served model when there are several (None: the first /v1/models lists)."""
    info = ArmInfo(url=client.base_url)
    with _noted(info.errors, "/v1/models"):
        models = await client.models()
        chosen = next((m for m in models if m.id == model), models[0] if models else None)
        if chosen is not None:
            info.served_name = chosen.id
            info.model = chosen.root or chosen.id
            info.max_model_len = chosen.max_model_len
    with _noted(info.errors, "/version"):
        info.vllm_version = await client.version() or info.vllm_version
    with _noted(info.errors, "/sim/info"):
        info.server_gpu = _sim_gpu(await client.get_json("/sim/info"))
    with _noted(info.errors, "/metrics"):
        snap = await client.scrape(model or info.served_name)
        info.speculative = snap.speculative
        if snap.speculative and info.k is None:
            info.k = snap.num_speculative_tokens
        info.engine = dict(snap.cache_config)
    return info


def _sim_gpu(doc: Any) -> dict[str, Any] | None:
    """The GPU a simulator's /sim/info models, named as simulated; None for anything else (a real
    vLLM answers 404, which `get_json` gives as None)."""
    if not isinstance(doc, Mapping) or doc.get("simulator") != "mtpwatch-sim" or not doc.get("gpu"):
        return None
    peak = doc.get("peak_gbps")
    return {"name": f"{doc['gpu']} (simulated)", "peak_gbps": peak if isinstance(peak, int | float) else None}


def launched_info(url: str, argv: Sequence[str], facts: LogFacts | None = None) -> ArmInfo:
    """What the command line (its `--speculative-config`) and start-up log (the `facts` read from it;
    None: none) of a server mtpwatch started say about it; the log wins."""
    info = ArmInfo(url=url, launch_argv=mask_argv(list(argv)))
    if config := spec_config_from_argv(argv):
        info.spec_config = config
        method, k, drafter = config.get("method"), config.get("num_speculative_tokens"), config.get("model")
        info.method = method if isinstance(method, str) else None
        info.k = k if isinstance(k, int) and not isinstance(k, bool) else None
        info.drafter = drafter if isinstance(drafter, str) else None
    facts = facts if facts is not None else LogFacts()
    info.method = facts.spec_method or info.method
    info.k = facts.num_spec_tokens if facts.num_spec_tokens is not None else info.k
    info.drafter = facts.spec_model or info.drafter
    info.vllm_version = facts.vllm_version
    logged = {
        "method": facts.spec_method,
        "model": facts.spec_model,
        "num_speculative_tokens": facts.num_spec_tokens,
    }
    if logged := {key: value for key, value in logged.items() if value is not None}:
        info.spec_config = {**(info.spec_config or {}), "from_log": logged}
    return info


def launched_arm_info(arm: Any) -> ArmInfo:
    """An `ArmInfo` for a bench arm whose server mtpwatch starts (`core.ab.http_arm.LaunchedArm`): its
    command line and the log of its last start, plus what the server said while it was up."""
    info = launched_info(arm.url, arm.argv, facts=getattr(arm, "log_facts", None))
    probed: ArmInfo | None = getattr(arm, "probed", None)
    if probed is not None:
        for name in (
            "served_name", "model", "vllm_version", "engine", "max_model_len", "speculative", "server_gpu",
        ):  # fmt: skip
            value = getattr(probed, name)
            if value not in (None, {}):
                setattr(info, name, value)
        if info.k is None:
            info.k = probed.k
        info.errors.extend(probed.errors)
    return info


async def describe_arm(arm: Any) -> ArmInfo:
    """An `ArmInfo` for a bench arm (`HttpArm` asked over HTTP, `LaunchedArm` as above); never raises."""
    if getattr(arm, "argv", None) is not None:
        return launched_arm_info(arm)
    return await probe_arm(arm.client, getattr(arm, "model", None))


@dataclass(frozen=True, slots=True)
class GpuInfo(JsonFields):
    """The GPU the numbers were measured on, and where that was learnt."""

    name: str | None
    peak_gbps: float | None
    source: str
    """'nvml (this host)', '--gpu', or 'unknown'."""


def server_gpu(arms: Iterable[ArmInfo]) -> GpuInfo | None:
    """The GPU the arms' servers report (simulators: their /sim/info), when they all name one GPU."""
    gpus = [arm.server_gpu for arm in arms]
    names = {g.get("name") for g in gpus if g}
    if len(names) != 1 or not all(gpus):
        return None
    first = gpus[0] or {}
    source = "the server's /sim/info (a simulator: the GPU it models, not a GPU it runs on)"
    return GpuInfo(first.get("name"), first.get("peak_gbps"), source)


def report_gpu(named: str | None, arms: Sequence[ArmInfo] = (), *, local: bool) -> GpuInfo:
    """The report's GPU: the user's --gpu (with its peak when mtpwatch's table knows it); else NVML on
    this host (servers on loopback); else the one the servers report (a simulator's, marked
    simulated); else unknown, saying why."""
    if named:
        try:
            spec = lookup_gpu(named)
        except UnknownGpuError:
            return GpuInfo(named, None, "--gpu")
        return GpuInfo(spec.key, spec.peak_gbps, "--gpu")
    found = _local_gpu() if local else None
    if found is not None and found.name is not None:
        return found
    return server_gpu(arms) or found or GpuInfo(None, None, "unknown (remote servers: give --gpu)")


def _local_gpu() -> GpuInfo:
    """This host's GPU through NVML; `name` None when there is none (or no NVML)."""
    try:
        reading = local_gpu_reading()
    except Exception:
        return GpuInfo(None, None, "unknown")
    if reading.device_name is None:
        return GpuInfo(None, None, f"unknown ({reading.reason or 'no NVML GPU on this host'})")
    return GpuInfo(reading.device_name, reading.peak_gbps, "nvml (this host)")


def utc_now() -> str:
    """The current UTC time, ISO 8601 with a Z (seconds)."""
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def build_meta(
    *,
    argv: Sequence[str] | None = None,
    label: str | None = None,
    metadata: Mapping[str, str] | None = None,
    arms: Mapping[str, ArmInfo] | None = None,
    prompts: Mapping[str, Any] | None = None,
    gpu: GpuInfo | None = None,
    temperature: float | None = None,
) -> dict[str, Any]:
    """The `meta` object (argv masked here, whatever the caller passes)."""
    return {
        "schema": SCHEMA,
        "mtpwatch_version": __version__,
        "created_utc": utc_now(),
        "argv": mask_argv(list(sys.argv if argv is None else argv)),
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "label": label,
        "metadata": dict(metadata or {}),
        "temperature": temperature,
        "gpu": gpu.to_json() if gpu is not None else None,
        "prompt_set": dict(prompts) if prompts is not None else None,
        "arms": {name: info.to_json() for name, info in (arms or {}).items()},
    }


def with_meta(
    body: Mapping[str, Any], meta: Mapping[str, Any] | None = None, **fields: Any
) -> dict[str, Any]:
    """`body` as a document that starts with the `meta` block, as every JSON mtpwatch writes does:
    `meta` when given (a bench's, collected while it ran), else `build_meta(**fields)`. A `meta` key
    already in `body` is replaced, not repeated."""
    rest = {key: value for key, value in body.items() if key != "meta"}
    return {"meta": dict(meta) if meta is not None else build_meta(**fields), **rest}


def comparable_fields(meta: Mapping[str, Any], report: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The provenance that must agree for two reports to be compared (None = not recorded): GPU
    name, vLLM version and model per arm, prompt set hash and temperature (`meta`'s, else `report`'s)."""
    gpu = meta.get("gpu") or {}
    arms = meta.get("arms") or {}
    temp = meta.get("temperature")
    if temp is None and report is not None:
        temp = report.get("temperature")
    out: dict[str, Any] = {
        "GPU": gpu.get("name") if isinstance(gpu, Mapping) else None,
        "prompt set hash": (meta.get("prompt_set") or {}).get("hash"),
        "temperature": temp,
    }
    for arm in ("a", "b"):
        info = arms.get(arm) if isinstance(arms, Mapping) else None
        if isinstance(info, Mapping):
            out[f"vLLM version (arm {arm.upper()})"] = info.get("vllm_version")
            out[f"model (arm {arm.upper()})"] = arm_model(info)
    return out


MUST_BE_KNOWN = ("GPU", "model (arm A)", "model (arm B)")
"""The `comparable_fields` a comparison cannot do without: one report that does not know its GPU
or its model may be another GPU or model than the rest, so `compare` says it cannot check them."""


def arm_model(info: Mapping[str, Any]) -> str | None:
    """An arm's model as a report names it: the served name, with what it was loaded from if different."""
    served, root = info.get("served_name"), info.get("model")
    if served and root and root != served:
        return f"{served} ({root})"
    return str(served or root) if (served or root) else None


def arm_warnings(arms: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per reason the A/B arms (`meta.arms` objects) do not measure speculation on/off of one
    model: two running arms at one server (the same URL, localhost and 127.0.0.1 alike; servers
    mtpwatch starts one at a time may share a port), or two arms serving different models."""
    a, b = arms.get("a"), arms.get("b")
    if not a or not b:
        return []
    out: list[str] = []
    url_a, url_b = str(a.get("url") or ""), str(b.get("url") or "")
    launched = a.get("launch_argv") is not None or b.get("launch_argv") is not None
    if url_a and url_b and not launched and same_server(url_a, url_b):
        out.append(
            f"A and B are the same server ({url_a}): the bench measures it against itself; "
            "give the baseline's and the treatment's URLs"
        )
    model_a, model_b = a.get("model") or a.get("served_name"), b.get("model") or b.get("served_name")
    if model_a and model_b and model_a != model_b:
        out.append(
            f"A serves {arm_model(a)} and B serves {arm_model(b)}: the speed-up compares two models, "
            "not speculative decoding on and off"
        )
    return out
