"""The servers one experiment launches: A/B twins or a k sweep, with their command lines and memory plan.

A/B twins (`plan_twins`): A is the baseline (no speculation, and none of the treatment's speculative
flags), B the treatment (``--method``/``--drafter``/``-k``). Flags after ``--`` go to both;
``a_args``/``b_args`` to one. A k sweep (`plan_sweep`): one server per k (k = 0 is the baseline),
started one at a time. Each server gets its API key through the environment, a loopback port, and —
when a GPU is planned for — its own memory share from `memplan`."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mtpwatch.core.launch.memneeds import estimate_need
from mtpwatch.core.launch.memplan import (
    GpuMemory,
    MemoryFlags,
    MemoryPlan,
    ServerNeed,
    memory_rule,
    plan_memory,
)
from mtpwatch.core.launch.ports import connect_url
from mtpwatch.core.launch.specrule import MethodChoice, VllmVersion
from mtpwatch.core.launch.vllm_cmd import (
    UNKNOWN_VERSION,
    build_speculative_config,
    build_vllm_argv,
    server_env,
)

MASK = "***"

#: Command-line flags whose value is a secret (the value after them, or after '=', is masked).
SECRET_FLAGS = frozenset(
    {"--api-key", "--hf-token", "--token", "--password", "--secret", "--ssl-keyfile-password"}
)
_SECRET_WORDS = ("key", "token", "secret", "password", "passwd", "auth", "credentials")


def secret_name(name: str) -> bool:
    """True for names like --api-key, HF_TOKEN, db_password (not --max-tokens, --ssl-keyfile); so
    VLLM_API_KEY and LLAMA_API_KEY (`llamacpp_cmd.llamacpp_key_env`) are masked in plans."""
    words = re.split(r"[-_.]+", name.lower().strip("-"))
    return bool(words) and words[-1] in _SECRET_WORDS


def mask_secrets(text: str) -> str:
    """`text` with bearer tokens, URL passwords and NAME=value secrets replaced by ***."""
    text = re.sub(r"(?i)(bearer\s+)\S+", lambda m: m.group(1) + MASK, text)
    text = re.sub(r"(://[^/\s:@]+:)[^@/\s]+@", lambda m: m.group(1) + MASK + "@", text)

    def env(m: re.Match[str]) -> str:
        return m.group(1) + "=" + MASK if secret_name(m.group(1)) else m.group(0)

    return re.sub(r"\b([A-Za-z_][A-Za-z0-9_.-]*)=(\S+)", env, text)


def mask_argv(argv: Sequence[str]) -> list[str]:
    """The command line with every secret replaced by *** (flag values, NAME=value, URL passwords),
    inner command lines (``--launch-a 'vllm serve … --api-key X'``) word by word."""
    out = list(argv)
    for i, arg in enumerate(out):
        flag, eq, _ = arg.partition("=")
        if flag in SECRET_FLAGS or (flag.startswith("--") and secret_name(flag)):
            if eq:
                out[i] = flag + "=" + MASK
            elif i + 1 < len(out):
                out[i + 1] = MASK  # the value after the flag
        elif " " in arg:  # a whole inner command line: mask it word by word, keep its spacing
            out[i] = " ".join(mask_argv(arg.split(" ")))
        else:
            out[i] = mask_secrets(arg)
    return out


@dataclass(frozen=True, slots=True)
class PlannedServer:
    label: str
    role: str
    """'baseline' or 'treatment'."""
    k: int
    """num_speculative_tokens (0: no speculation)."""
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    url: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "role": self.role,
            "k": self.k,
            "url": self.url,
            "argv": mask_argv(self.argv),
            "env": {key: MASK if secret_name(key) else value for key, value in self.env.items()},
        }


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """The servers, in start order, and how memory is shared between them."""

    servers: tuple[PlannedServer, ...]
    memory: MemoryPlan
    version: VllmVersion = UNKNOWN_VERSION
    """The installed vLLM's version, read before planning (`specrule.read_vllm_version`)."""
    method: str = ""
    """How the treatment's method was chosen (`specrule.MethodChoice.why`)."""

    @property
    def schedule(self) -> str:
        return self.memory.schedule

    def to_json(self) -> dict[str, Any]:
        mem = self.memory.to_json()
        return {
            "servers": [
                {**s.to_json(), "memory": m} for s, m in zip(self.servers, mem["servers"], strict=True)
            ],
            "schedule": mem["schedule"],
            "why": mem["why"],
            "gpu": mem["gpu"],
            "notes": mem["notes"],
            "vllm": self.version.to_json(),
            "method": self.method,
        }

    def lines(self) -> list[str]:
        out = [self.version.words()]
        if self.method:
            out.append(f"speculative method: {self.method}")
        out.extend(self.memory.lines())
        out.append("")
        for s in self.servers:
            out += [f"{s.label}:", "  " + shell_line(s.argv, s.env)]
        return out


def shell_line(argv: Sequence[str], env: Mapping[str, str]) -> str:
    """A copy-pasteable command line, secrets masked."""
    prefix = [f"{k}={MASK if secret_name(k) else shlex.quote(v)}" for k, v in env.items()]
    return " ".join([*prefix, shlex.join(mask_argv(argv))])


def _spec_k(config: Mapping[str, Any] | None) -> int:
    return 0 if config is None else int(config.get("num_speculative_tokens", 1))


def plan_twins(
    model: str,
    *,
    ports: tuple[int, int],
    method: str | None = None,
    drafter: str | None = None,
    k: int | None = None,
    speculative_config: str | None = None,
    vllm: str = "vllm",
    host: str = "127.0.0.1",
    api_key: str | None = None,
    extra: Sequence[str] = (),
    a_args: Sequence[str] = (),
    b_args: Sequence[str] = (),
    gpu: GpuMemory | None = None,
    restart: bool | None = None,
    version: VllmVersion = UNKNOWN_VERSION,
    drafter_gib: float | None = None,
) -> LaunchPlan:
    """A (baseline) and B (treatment) for `model`, and their memory plan; raises `VllmArgsError` or
    `PlanError` (one line). `restart`: True forces one server at a time, False forbids it (a plan
    that cannot fit both is refused), None lets the plan decide. `version`: the installed vLLM's,
    whose rule names B's method (`specrule`) and the memory rule (`memplan.memory_rule`)."""
    config, choice = build_speculative_config(
        drafter=drafter, k=k, method=method, speculative_config=speculative_config, version=version
    )
    if config is None:
        config, choice = build_speculative_config(method="mtp")
    assert config is not None
    specs = [
        ("A · MTP off", "baseline", None, [*extra, *a_args], ports[0]),
        ("B · " + _name(config), "treatment", config, [*extra, *b_args], ports[1]),
    ]
    return _plan(
        model, specs, vllm=vllm, host=host, api_key=api_key, gpu=gpu, together=restart is not True,
        restart_allowed=restart is not False, choice=choice, version=version, drafter_gib=drafter_gib,
    )  # fmt: skip


def plan_sweep(
    model: str,
    ks: Sequence[int],
    *,
    ports: Sequence[int],
    method: str | None = None,
    drafter: str | None = None,
    vllm: str = "vllm",
    host: str = "127.0.0.1",
    api_key: str | None = None,
    extra: Sequence[str] = (),
    gpu: GpuMemory | None = None,
    version: VllmVersion = UNKNOWN_VERSION,
    drafter_gib: float | None = None,
) -> LaunchPlan:
    """One server per k of `ks` (0 = no speculation), run one at a time."""
    specs: list[tuple[str, str, Mapping[str, Any] | None, list[str], int]] = []
    choice: MethodChoice | None = None
    for kk, port in zip(ks, ports, strict=True):
        if kk == 0:
            specs.append(("k=0 · no speculation", "baseline", None, list(extra), port))
            continue
        config, choice = build_speculative_config(drafter=drafter, k=kk, method=method, version=version)
        assert config is not None
        specs.append(
            (f"k={kk} · {config.get('method') or 'vLLM detects'}", "treatment", config, list(extra), port)
        )
    return _plan(
        model, specs, vllm=vllm, host=host, api_key=api_key, gpu=gpu, together=False, restart_allowed=True,
        choice=choice, version=version, drafter_gib=drafter_gib,
    )  # fmt: skip


#: What the launch label calls a method (the panel's `session.views.method_name` once vLLM says).
_METHOD_WORDS = {"mtp": "MTP", "eagle3": "EAGLE-3", "eagle": "EAGLE", "dflash": "DFlash", "dspark": "DSpark"}


def _name(config: Mapping[str, Any]) -> str:
    """B's label until the server log says which method vLLM ran."""
    k = _spec_k(config)
    method = config.get("method")
    if not isinstance(method, str):
        return f"k={k} · method: vLLM detects"
    return f"{_METHOD_WORDS.get(method, method.replace('_', ' '))} k={k}"


def _plan(
    model: str,
    specs: Sequence[tuple[str, str, Mapping[str, Any] | None, list[str], int]],
    *,
    vllm: str,
    host: str,
    api_key: str | None,
    gpu: GpuMemory | None,
    together: bool,
    restart_allowed: bool,
    choice: MethodChoice | None,
    version: VllmVersion,
    drafter_gib: float | None,
) -> LaunchPlan:
    """The servers of `specs` (label, role, speculative config, own flags, port) and their memory plan."""
    env = server_env(api_key)
    argvs: list[list[str]] = []
    rows: list[tuple[str, ServerNeed | None, MemoryFlags]] = []
    for label, _role, config, args, port in specs:
        argv = build_vllm_argv(
            model, speculative_config=config, no_spec=config is None, host=host, port=port, vllm=vllm,
            extra=args,
        )  # fmt: skip
        argvs.append(argv)
        flags = MemoryFlags.from_argv(args)
        drafter = config.get("model") if config else None
        method = (choice.expected if choice else None) or (config.get("method") if config else None)
        server_need = None
        if gpu is not None:  # `estimate_need` counts `drafter_gib` only for a drafter
            server_need = estimate_need(
                model,
                method=method,
                drafter=drafter,
                max_model_len=flags.max_model_len,
                enforce_eager=flags.enforce_eager,
                drafter_gib=drafter_gib,
            )
        rows.append((label, server_need, flags))
    rule = memory_rule(version.release)
    memory = plan_memory(gpu, rows, together=together, restart_allowed=restart_allowed, rule=rule)
    servers = []
    for (label, role, config, _args, port), argv, mem in zip(specs, argvs, memory.servers, strict=True):
        url = connect_url(host, port)
        servers.append(PlannedServer(label, role, _spec_k(config), (*argv, *mem.added_flags), dict(env), url))
    return LaunchPlan(tuple(servers), memory, version, choice.why if choice else "")
