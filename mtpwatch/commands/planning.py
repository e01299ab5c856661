"""Options and output of the commands that launch several vLLM servers (`ab --start`, `bench --start`)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from typing import Any

import click

from mtpwatch.commands.options import F, gpu_free_option, gpu_memory_option, one_line, stacked


class PassthroughCommand(click.Command):
    """A click command whose arguments after ``--`` go to vLLM unchanged (``ctx.meta['extra']``), kept
    before click parses the rest, so ``-- --max-model-len 8192`` never lands in a positional argument."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        i = args.index("--") if "--" in args else len(args)
        ctx.meta["extra"] = tuple(args[i + 1 :])
        return super().parse_args(ctx, args[:i])


def extra_args() -> tuple[str, ...]:
    """The arguments after ``--`` of the running command."""
    extra: tuple[str, ...] = click.get_current_context().meta.get("extra", ())
    return extra


def split_args(value: str | None, option: str) -> tuple[str, ...]:
    """A shell-quoted string of vLLM flags (``-a '--max-num-seqs 4'``) as a list."""
    if not value:
        return ()
    with one_line(ValueError, option=option):
        return tuple(shlex.split(value))


def drafter_gib_option(help_prefix: str = "") -> Callable[[F], F]:
    """--drafter-gib GIB: the drafter's weights where its size is unknown offline (counted in the plan)."""
    return click.option(
        "--drafter-gib",
        type=click.FloatRange(min=0.0, min_open=True),
        metavar="GIB",
        help=help_prefix + "The drafter's weights in GiB, for the memory plan when its config.json or "
        "checkpoint is not found offline (a local folder or the Hugging Face cache).",
    )


def plan_options(func: F) -> F:
    """Add --plan, --json, --gpu-memory, --gpu-free, --drafter-gib (the memory plan of launched servers)."""
    return stacked(
        func,
        click.option(
            "--plan",
            "show_plan",
            is_flag=True,
            help="Print the memory plan and the exact command lines (secrets masked), then exit.",
        ),
        click.option("--json", "plan_json", is_flag=True, help="With --plan: print it as JSON."),
        gpu_memory_option(
            "Plan for this much GPU memory (GiB) instead of what the GPU or the --gpu table says."
        ),
        gpu_free_option("Plan with this much free GPU memory (GiB)."),
        drafter_gib_option("With --start: "),
    )


def gpu_for_plan(gpu: str | None, gpu_memory: float | None, gpu_free: float | None) -> Any:
    """The `GpuMemory` to plan against (None: no GPU here and none named)."""
    from mtpwatch.core.launch.gpumem import resolve_gpu_memory
    from mtpwatch.core.launch.memplan import PlanError

    with one_line(PlanError):
        return resolve_gpu_memory(gpu, total_gib=gpu_memory, free_gib=gpu_free)


def print_plan(plan: Any, as_json: bool) -> None:
    """Print a `LaunchPlan` (secrets masked) as text or JSON."""
    if as_json:
        from mtpwatch.core.provenance import with_meta

        click.echo(json.dumps(with_meta(plan.to_json(), metadata={"source": "memory plan"}), indent=2))
    else:
        for line in plan.lines():
            click.echo(line)
