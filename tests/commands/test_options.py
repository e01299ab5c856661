"""Each shared flag is defined once (commands/options.py), its default read from the dataclass it fills."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import click
import pytest

from mtpwatch.commands import ab, attach, bench, demo, snapshot, start
from mtpwatch.commands.options import field_default
from mtpwatch.config import AppConfig, DisplaySettings, LaunchSpec, MeasureSettings
from mtpwatch.core.ab.plan import BenchConfig

COMMANDS = Path(__file__).resolve().parents[2] / "mtpwatch" / "commands"
SHARED = (
    "--api-key", "--startup-timeout", "--prompts", "--limit", "--schedule", "--label", "--metadata",
    "--runs", "--warmup", "--temperature", "--interval", "--fps", "--method", "--drafter", "--vllm",
    "--model", "--gpu", "--gpu-memory", "--gpu-free", "-k",
)  # fmt: skip
#: Flags of the same name that mean something else, and why.
OWN = {
    ("roofline.py", "-k"): "k = 0 is plain decoding there (0..64, default 0), not a server to start",
}


def _param(cmd: click.Command, name: str) -> click.Parameter:
    return next(p for p in cmd.params if p.name == name)


def test_a_shared_flag_is_defined_in_options_only() -> None:
    defined: dict[str, list[str]] = {}
    for path in sorted(COMMANDS.glob("*.py")):
        if path.name == "sim.py":  # the simulator's own --api-key: the key it requires, not one it sends
            continue
        text = path.read_text(encoding="utf-8")
        for flag in SHARED:
            # a definition is the flag as the first argument of click.option(...); a param_hint is not
            if re.search(r"click\.option\(\s*" + re.escape(f'"{flag}"'), text):
                defined.setdefault(flag, []).append(path.name)
    stray = {f: [w for w in where if w != "options.py" and (w, f) not in OWN] for f, where in defined.items()}
    assert {f: where for f, where in stray.items() if where} == {}


@pytest.mark.parametrize(
    ("cmd", "param", "cls", "field"),
    [
        (bench.command, "runs", BenchConfig, "runs"),
        (bench.command, "warmup", BenchConfig, "warmup"),
        (bench.command, "temperature", BenchConfig, "temperature"),
        (bench.command, "schedule", BenchConfig, "schedule"),
        (bench.command, "startup_timeout", LaunchSpec, "startup_timeout_s"),
        (ab.command, "runs", MeasureSettings, "runs"),
        (ab.command, "warmup", MeasureSettings, "warmup"),
        (ab.command, "schedule", AppConfig, "schedule"),
        (demo.command, "schedule", AppConfig, "schedule"),
        (attach.command, "interval", DisplaySettings, "scrape_interval_s"),
        (attach.command, "fps", DisplaySettings, "max_fps"),
        (attach.command, "max_tokens", DisplaySettings, "max_tokens"),
        (attach.command, "temperature", DisplaySettings, "temperature"),
        (start.command, "startup_timeout", LaunchSpec, "startup_timeout_s"),
    ],
)
def test_the_default_is_the_dataclass_field_it_fills(
    cmd: click.Command, param: str, cls: type, field: str
) -> None:
    assert _param(cmd, param).default == field_default(cls, field)


def test_the_same_flag_has_one_range_everywhere() -> None:
    # (--method is left out: its choices are the engines the command can start; start adds llama.cpp's)
    for name in ("limit", "startup_timeout", "api_key", "k", "vllm_cmd", "model", "gpu"):
        cmds = [c for c in (ab.command, bench.command, start.command, attach.command, snapshot.command)
                if any(p.name == name for p in c.params)]  # fmt: skip
        kinds = {repr(_param(c, name).type) for c in cmds}
        assert len(cmds) >= 2 and len(kinds) == 1, (name, kinds)
    envvars = {tuple(getattr(_param(c, "api_key"), "envvar", None) or ()) for c in (ab.command, bench.command,
               start.command, attach.command, snapshot.command)}  # fmt: skip
    assert envvars == {("VLLM_API_KEY", "OPENAI_API_KEY")}


def test_field_default_reads_factories_and_refuses_a_field_without_one() -> None:
    assert field_default(AppConfig, "display") == DisplaySettings()
    with pytest.raises(LookupError, match=r"AppConfig\.servers"):
        field_default(AppConfig, "servers")
    assert {f.name for f in dataclasses.fields(MeasureSettings)} >= {"runs", "warmup"}
