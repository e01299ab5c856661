"""`mtpwatch attach URL [URL …]`: watch running servers (one: the monitor; several: the fleet view)."""

from __future__ import annotations

import sys

import click

from mtpwatch.commands.connection import DEFAULT_URL, tls_options
from mtpwatch.commands.options import (
    api_key_option,
    checked_url,
    display_options,
    display_settings,
    model_option,
    record_option,
)
from mtpwatch.config import AppConfig, FleetSettings, ServerSpec


def _refuse_non_vllm(url: str, api_key: str | None, model: str | None) -> None:
    """Before the screen opens: a server that answers but is not vLLM (or llama.cpp), refuses the
    key, or lacks --model gets snapshot's one-line error. One that is not up yet (refused, silent,
    5xx) opens the monitor, which waits for it and says so."""
    import asyncio

    from mtpwatch.commands.snapshot import TIMEOUT_S
    from mtpwatch.commands.snapshot import _parse as check_page  # snapshot's words for a bad page
    from mtpwatch.core.http.client import VllmClient
    from mtpwatch.core.http.errors import AuthError, NotVllmError, ServerError

    async def scrape() -> str:
        async with VllmClient(url, api_key=api_key, timeout=TIMEOUT_S) as client:
            return await client.scrape_text()

    try:
        text = asyncio.run(scrape())
    except (NotVllmError, AuthError) as exc:
        raise click.ClickException(str(exc)) from None
    except ServerError:
        return
    check_page(text, url, model)


@click.command("attach")
@click.argument("urls", nargs=-1, metavar="[URL]...")
@model_option("model_name to watch when the server serves several.")
@api_key_option()
@click.option(
    "--file",
    "url_file",
    type=click.Path(dir_okay=False),
    help="A file of server URLs, one per line (# comments): the fleet view.",
)
@click.option("--prometheus", metavar="URL", help="Read the fleet from this Prometheus server.")
@click.option(
    "--selector",
    default="",
    show_default=False,
    metavar="'{job=\"vllm\"}'",
    help="With --prometheus: extra PromQL label matchers for every query.",
)
@click.option(
    "--window",
    type=click.FloatRange(1.0, 3600.0),
    default=10.0,
    help="Fleet view: seconds of the rates shown (F3 switches 10 s / 60 s).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Fleet: no screen; print one JSON document (direct: after scraping for --window seconds).",
)
@display_options
@tls_options
@record_option
def command(
    urls: tuple[str, ...],
    model: str | None,
    api_key: str | None,
    url_file: str | None,
    prometheus: str | None,
    selector: str,
    window: float,
    as_json: bool,
    record: str | None,
    **display: object,
) -> None:
    """Watch a running vLLM server at URL (default http://127.0.0.1:8000) and send it prompts.

    With several URLs (or --file, or --prometheus) it opens the fleet view: one row per server and
    engine, outliers marked; Enter opens a row's monitor, Escape returns.
    """
    from mtpwatch.commands import fleet

    settings = display_settings(**display)
    if record is not None and (prometheus is not None or url_file is not None or len(urls) > 1 or as_json):
        raise click.UsageError("--record goes with one server's monitor, not the fleet view or --json")
    if model is not None and (prometheus is not None or url_file is not None or len(urls) > 1):
        raise click.UsageError("--model goes with one URL: the fleet view shows every model, one row each")
    if prometheus is not None:
        if urls or url_file:
            raise click.UsageError("--prometheus reads every server from Prometheus: give no URL or --file")
        base = checked_url(prometheus, "--prometheus")
        fleet.checked_selector(selector)
        if as_json:
            fleet.echo_json(fleet.prometheus_json(base, selector=selector, window_s=window))
            return
        fleet_settings = FleetSettings(prometheus=base, selector=selector, window_s=window, api_key=api_key)
    else:
        if not urls and url_file is None:
            urls = (DEFAULT_URL,)  # where `vllm serve` listens by default
        if selector:
            raise click.UsageError("--selector goes with --prometheus")
        servers = fleet.server_list(urls, url_file)
        if as_json:
            fleet.echo_json(
                fleet.direct_json(
                    servers,
                    window_s=window,
                    interval_s=settings.scrape_interval_s,
                    idle_interval_s=settings.idle_interval_s,
                    api_key=api_key,
                )
            )
            return
        fleet_settings = FleetSettings(urls=tuple(servers), window_s=window, api_key=api_key)
    if len(fleet_settings.urls) == 1 and url_file is None:  # one server: its monitor
        url = fleet_settings.urls[0]
        _refuse_non_vllm(url, api_key, model)
        spec = ServerSpec(label=url, url=url, model=model, api_key=api_key)
        config = AppConfig(servers=[spec], display=settings, record=record)
    else:
        config = AppConfig(servers=[], display=settings, fleet=fleet_settings, title="mtpwatch fleet")
    from mtpwatch.ui.app import run_app  # lazy: Textual loads only for the UI

    sys.exit(run_app(config))
