"""`mtpwatch bench --ab URL_A URL_B --context-lengths 256,1024,4096`: acceptance, per-position
acceptance and the paired speed-up per prompt length (one URL: acceptance and tok/s only).

Called by the `bench` command; the padding and its checks are `core.sweeps.context`'s. Each length is
one bench on the alternate schedule over the set padded to it; the table prints a row per length,
`--json-file FILE` writes the rows and each length's full bench report (`--json` prints them instead).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import click
import httpx

from mtpwatch.commands.bench_run import arms_and_runner
from mtpwatch.commands.connection import DEFAULT_URL
from mtpwatch.commands.options import one_line
from mtpwatch.core.ab import workloads
from mtpwatch.core.ab.options import BenchOptions
from mtpwatch.core.ab.plan import BenchConfig, BenchConfigError
from mtpwatch.core.jsonout import dumps
from mtpwatch.core.reports import reportio
from mtpwatch.core.reports.reportfile import CONTEXT_KIND
from mtpwatch.core.sweeps.context import (
    CHARS_PER_TOKEN,
    ContextError,
    Padded,
    check_lengths,
    filler_text,
    pad_prompt,
    parse_lengths,
)
from mtpwatch.render.numbers import fixed, interval, percent, tok_s, vector


class _Server:
    """The first server's /v1/models and /tokenize (both arms serve one model and tokenizer)."""

    def __init__(self, url: str, api_key: str | None, model: str | None) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else None
        self.client = httpx.Client(base_url=url, headers=headers, timeout=30.0)
        self.model = model
        self.can_count = True

    def max_model_len(self) -> int | None:
        try:
            cards = self.client.get("/v1/models").json().get("data") or []
        except (httpx.HTTPError, ValueError, AttributeError):
            return None
        card = next((c for c in cards if self.model is None or c.get("id") == self.model), None)
        if self.model is None and card is not None:
            self.model = card.get("id")
        value = card.get("max_model_len") if isinstance(card, dict) else None
        return value if isinstance(value, int) else None

    def count(self, text: str) -> int | None:
        if not self.can_count:
            return None
        try:
            reply = self.client.post("/tokenize", json={"model": self.model, "prompt": text})
            value = reply.json().get("count") if reply.status_code == 200 else None
        except (httpx.HTTPError, ValueError, AttributeError):
            value = None
        self.can_count = isinstance(value, int)
        return value if self.can_count else None


def context_from_bench(opts: BenchOptions) -> None:
    """The bench's --context-lengths branch."""
    if opts.start_model is not None or opts.schedule == "restart":
        raise click.UsageError("--context-lengths measures running servers: give URL or --ab URL_A URL_B")
    with one_line(ContextError, workloads.WorkloadError, option="--context-lengths / --prompts"):
        lengths = parse_lengths(opts.context_lengths or "")
        prompts = workloads.resolve(opts.prompts_spec, limit=opts.limit, max_tokens=opts.max_tokens)
    urls = list(opts.ab) if opts.ab else [opts.url or DEFAULT_URL]
    server = _Server(urls[0], opts.api_key, opts.model)
    with one_line(ContextError):
        check_lengths(lengths, prompts, server.max_model_len())
    filler = filler_text(prompts)
    rows: list[dict[str, Any]] = []
    benches: dict[str, Any] = {}
    for n in lengths:
        padded = [pad_prompt(p, n, filler, server.count) for p in prompts]
        click.echo(f"mtpwatch bench: context length {n} ({len(padded)} prompt(s))", err=True)
        report = _bench(padded, opts, urls[0])
        rows.append(_row(n, padded, report))
        benches[str(n)] = reportio.report_document(report, None)
    source = "server /tokenize" if server.can_count else f"estimated, {CHARS_PER_TOKEN} characters a token"
    doc = {"tool": "mtpwatch bench", "kind": CONTEXT_KIND, "token_source": source, "rows": rows}
    if opts.json_path is not None:
        reportio.write_document(opts.json_path, {**doc, "bench": benches})
        click.echo(f"wrote {opts.json_path}", err=True)
    if opts.json_out:  # --json: the rows and each length's report on stdout instead of the table
        click.echo(dumps({**doc, "bench": benches}, indent=2))
    else:
        click.echo(format_context(doc, paired=opts.ab is not None))


def _bench(padded: list[Padded], opts: BenchOptions, url: str) -> Any:
    config = BenchConfig(
        prompts=tuple(p.prompt for p in padded),
        runs=opts.runs,
        warmup=opts.warmup,
        schedule="alternate",
        temperature=opts.temperature,
        concurrency=(1,),
    )
    with one_line(BenchConfigError):
        config.validate(paired=opts.ab is not None)
    one = dataclasses.replace(opts, url=url, schedule="alternate", launch_a=None, launch_b=None)
    arms, runner = arms_and_runner(config, None, one, opts.arm_options())

    async def go() -> Any:
        try:
            return await runner.run()
        finally:
            for arm in arms:
                await arm.aclose()

    return asyncio.run(go())


def _row(n: int, padded: list[Padded], report: Any) -> dict[str, Any]:
    overall = report.primary.overall
    arm = overall.arms.get("b") or overall.arms["a"]
    acc, sp = arm.acceptance, overall.speedup
    return {
        "length": n,
        "prompt_tokens": [p.tokens for p in padded],
        "counted": all(p.counted for p in padded),
        "decode_tok_s": arm.rate.median if arm.rate else None,
        "acceptance_rate": acc.acceptance_rate if acc else None,
        "mean_acceptance_length": acc.mean_acceptance_length if acc else None,
        "per_position": list(acc.per_position) if acc and acc.per_position else None,
        "speedup": sp.median if sp else None,
        "speedup_ci": [sp.ci.low, sp.ci.high] if sp else None,
        "pairs": sp.n_pairs if sp else 0,
    }


def format_context(doc: dict[str, Any], *, paired: bool) -> str:
    lines = [
        f"mtpwatch bench · acceptance against context length · prompts padded from the set's own text, "
        f"lengths in tokens ({doc['token_source']})",
        ("speed-up = B / A per pair of runs; " if paired else "")
        + "acceptance and decode tok/s of "
        + ("B" if paired else "the server")
        + ", from its counters",
        "",
        f"{'length':>7}{'tokens sent':>14}{'decode tok/s':>14}{'speed-up [95% CI]':>26}{'pairs':>7}"
        f"{'acceptance':>12}{'mean len':>10}   per position",
    ]
    for r in doc["rows"]:
        sent = r["prompt_tokens"]
        span = f"{min(sent)}–{max(sent)}" if min(sent) != max(sent) else str(sent[0])
        ci = interval(r["speedup"], *r["speedup_ci"]) if r["speedup_ci"] else fixed(r["speedup"])
        lines.append(
            f"{r['length']:>7}{span:>14}{tok_s(r['decode_tok_s']):>14}{ci:>26}{r['pairs']:>7}"
            f"{percent(r['acceptance_rate']):>12}{fixed(r['mean_acceptance_length']):>10}   "
            f"{vector(r['per_position'])}"
        )
    return "\n".join(lines)


context_option = click.option(
    "--context-lengths",
    metavar="256,1024,...",
    help="Acceptance against context length: pad every prompt to these lengths in tokens (the server's "
    "/tokenize count, else ~4 characters a token, said), the set's own text repeated before it; checked "
    "against /v1/models max_model_len.",
)
