"""`mtpwatch snapshot`: speculative-decoding numbers once, from a server's /metrics or a saved page.

Like `vllm-top --once`: no TUI. With `--since` it shows deltas between two pages, otherwise the
cumulative totals since the server started; every number says which.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import click

from mtpwatch.commands.connection import DEFAULT_URL, tls_options
from mtpwatch.commands.options import api_key_option, checked_url, label_option, metadata_option, model_option
from mtpwatch.core.jsonout import dumps
from mtpwatch.core.metrics.parse import MetricsFormatError
from mtpwatch.core.metrics.rates import is_restart
from mtpwatch.core.metrics.report import snapshot_report
from mtpwatch.core.metrics.snapshot import MetricsSnapshot, UnknownModelError, parse_snapshot
from mtpwatch.core.provenance import ArmInfo, build_meta, parse_metadata, probe_arm
from mtpwatch.render.snapshot_table import render_fleet, render_table

TIMEOUT_S = 5.0
_HOST_PORT = re.compile(r"^[A-Za-z0-9.\-]+:\d+(/.*)?$")
# A sample line with a numeric value: tells "a metrics page without vllm: families" from any other text.
_SAMPLE_LINE = re.compile(
    r"^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^\n]*\})?[ \t]+[-+]?(?:[0-9.]+(?:[eE][-+]?[0-9]+)?|Inf|NaN)"
    r"(?:[ \t]+-?[0-9]+)?[ \t]*\r?$",
    re.MULTILINE,
)


def _is_url(source: str) -> bool:
    # Anything with a scheme is meant as a URL: normalize_url then says what is wrong with ftp://x.
    return "://" in source or bool(_HOST_PORT.match(source))


def _meta(
    source: str, api_key: str | None, model: str | None, label: str | None, metadata: dict[str, str]
) -> dict[str, Any]:
    """The provenance block: for a server, what it says about itself; for a saved page, its path."""
    if Path(source).exists() or not _is_url(source):
        return build_meta(label=label, metadata={**metadata, "page": source})
    from mtpwatch.core.http.client import VllmClient  # lazy, as in _fetch

    async def probe() -> ArmInfo:
        async with VllmClient(source, api_key=api_key, timeout=TIMEOUT_S) as client:
            return await probe_arm(client, model)

    return build_meta(label=label, metadata=metadata, arms={"a": asyncio.run(probe())})


def _fetch(source: str, api_key: str | None) -> tuple[str, dict[str, Any] | None]:
    """GET SOURCE/metrics/?name[]=… (or the whole page where the filter is not honoured, see
    `core.metrics.filtered`) through the project's client → (text, how it was scraped); its errors
    are already one actionable line."""
    # Lazy: reading saved pages needs no HTTP stack (httpx costs ~60 ms of start-up).
    from mtpwatch.core.http.client import VllmClient
    from mtpwatch.core.http.errors import ServerError
    from mtpwatch.core.metrics.filtered import ScrapeFilter

    async def scrape() -> tuple[str, dict[str, Any] | None]:
        filtered = ScrapeFilter(once=True)
        async with VllmClient(source, api_key=api_key, timeout=TIMEOUT_S, scrape_filter=filtered) as client:
            text = await client.scrape_text()
            state = client.scrape_state
            return text, state.as_json() if state is not None else None

    try:
        return asyncio.run(scrape())
    except (ServerError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None


def _load(source: str, api_key: str | None) -> tuple[str, dict[str, Any] | None]:
    """The page of SOURCE (a saved file or a server) and, for a server, how it was scraped."""
    if not source.strip():
        # Path("") is the current directory: say what is missing instead.
        raise click.ClickException("empty source: give a server URL (http://127.0.0.1:8000) or a saved page")
    path = Path(source)
    if path.exists():
        try:
            return path.read_text(encoding="utf-8"), None
        except IsADirectoryError:
            raise click.ClickException(f"{source} is a directory, not a saved /metrics page") from None
        except UnicodeDecodeError:
            raise click.ClickException(f"{source} is not a text file (not a /metrics page)") from None
        except OSError as exc:
            raise click.ClickException(f"cannot read {source}: {exc.strerror or exc}") from None
    if _is_url(source):
        return _fetch(source, api_key)
    raise click.ClickException(
        f"no such file: {source} (for a server, give a URL such as http://127.0.0.1:8000)"
    )


def _parse(text: str, source: str, model: str | None) -> MetricsSnapshot:
    try:
        snap = parse_snapshot(text, model)
    except (MetricsFormatError, UnknownModelError) as exc:
        raise click.ClickException(f"{source}: {exc}") from None
    if snap.schema == "none":
        if "# TYPE " in text or _SAMPLE_LINE.search(text):
            raise click.ClickException(
                f"{source} has no vllm: metrics: the server runs with --disable-log-stats, or is not vLLM"
            )
        raise click.ClickException(f"{source} is not a Prometheus /metrics page")
    return snap


def _check_since(source: str, since: str) -> None:
    """--since is an earlier page: the same live server twice would be two reads a moment apart."""
    from mtpwatch.core.http.urls import normalize_url, same_server

    live = [x for x in (source, since) if _is_url(x) and not Path(x).exists()]
    if len(live) == 2 and same_server(source, since):
        base = normalize_url(source)
        raise click.ClickException(
            f"--since {since} is the same server as {source}: give --since an earlier saved page "
            f"(curl -s {base}/metrics > before.txt), or watch the deltas live with mtpwatch attach {base}"
        )


def _check_order(before: MetricsSnapshot, after: MetricsSnapshot, source: str, since: str) -> None:
    """A counter that went down while `_created` stayed the same is not a restart: the pages are swapped."""
    if (
        before.created is not None
        and before.created == after.created
        and before.model == after.model
        and is_restart(before, after)
    ):
        raise click.ClickException(
            f"counters on {source} are lower than on {since} although the server did not restart "
            "(same _created): --since must be the earlier page; swap the two"
        )


@click.command("snapshot")
@click.argument("source", metavar="[URL|FILE]", required=False)
@click.option(
    "--since",
    metavar="FILE|URL",
    help="An earlier /metrics page: show deltas between the pages, not totals since server start.",
)
@model_option("model_name to show when several are served (default: the first).")
@api_key_option(
    "Bearer token for a server started with --api-key (default: $VLLM_API_KEY, else $OPENAI_API_KEY)."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of the table.")
@click.option("--prometheus", metavar="URL", help="The whole fleet, from this Prometheus server.")
@click.option(
    "--selector",
    default="",
    show_default=False,
    help="With --prometheus: extra PromQL label matchers, e.g. '{job=\"vllm\"}'.",
)
@click.option(
    "--window",
    type=click.FloatRange(1.0, 86400.0),
    default=60.0,
    help="With --prometheus: seconds of increase()/rate().",
)
@label_option("--json: a name kept in the meta block.")
@metadata_option("--json: extra provenance in the meta block.")
@tls_options
def command(
    source: str | None,
    since: str | None,
    model: str | None,
    api_key: str | None,
    as_json: bool,
    prometheus: str | None,
    selector: str,
    window: float,
    label: str | None,
    metadata: tuple[str, ...],
) -> None:
    """Print speculative-decoding numbers once, from a server URL (default http://127.0.0.1:8000) or a
    saved /metrics page (FILE), or for every server a Prometheus scrapes (--prometheus URL)."""
    try:
        extra = parse_metadata(metadata)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--metadata") from None
    if prometheus is not None:
        ctx = click.get_current_context()
        if ctx.get_parameter_source("source") != click.core.ParameterSource.COMMANDLINE:
            source = None  # a configured default URL does not fight --prometheus
        if source is not None or since is not None:
            raise click.UsageError(
                "--prometheus reads every server from Prometheus: give no URL|FILE or --since"
            )
        from mtpwatch.commands import fleet

        doc = fleet.prometheus_json(
            checked_url(prometheus, "--prometheus"),
            selector=fleet.checked_selector(selector),
            window_s=window,
        )
        if as_json:
            fleet.echo_json(doc, label, extra)
        else:
            click.echo(render_fleet(doc))
        return
    if source is None:
        source = DEFAULT_URL  # where `vllm serve` listens by default
    if since is not None:
        _check_since(source, since)
    text, scrape = _load(source, api_key)
    after = _parse(text, source, model)
    before = None
    if since is not None:
        # The same model on both pages, even when --model was left to its default.
        before = _parse(_load(since, api_key)[0], since, after.model)
        _check_order(before, after, source, since)
    report = snapshot_report(after, before)
    report["scrape"] = scrape
    if as_json:
        report["source"] = source
        report["since"] = since
        meta = _meta(source, api_key, after.model, label, extra)
        click.echo(dumps({"meta": meta, **report}, indent=2))
    else:
        click.echo(render_table(report, source, since))
