"""The fleet side of `attach` and `snapshot`: URL lists, the headless `--json` run, Prometheus once.

`attach URL URL …`, `attach --file FILE` and `attach --prometheus URL` open the fleet view;
with `--json` they print one fleet document instead (direct: after scraping for the window;
Prometheus: at once). `snapshot --prometheus URL` prints the same document (or a table) once.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import click

from mtpwatch.commands.options import checked_url, one_line
from mtpwatch.core.jsonout import dumps


def server_list(urls: tuple[str, ...], file: str | None) -> list[str]:
    """Arguments then the file's URLs (one per line; blank lines and `#` comments skipped), normalised,
    duplicates dropped (first kept)."""
    out = [checked_url(url, f"URL {i + 1}" if len(urls) > 1 else "URL") for i, url in enumerate(urls)]
    if file is None:
        return list(dict.fromkeys(out))
    try:
        text = Path(file).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise click.UsageError(f"--file: no such file: {file}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise click.UsageError(f"--file: cannot read {file}: {exc}") from None
    lines = [(n, line.split("#", 1)[0].strip()) for n, line in enumerate(text.splitlines(), 1)]
    listed = [checked_url(entry, f"--file {file} line {n}") for n, entry in lines if entry]
    if not listed:
        raise click.UsageError(f"--file: {file} lists no URL (one per line; # starts a comment)")
    return list(dict.fromkeys(out + listed))


def checked_selector(selector: str) -> str:
    from mtpwatch.core.sources.prometheus import check_selector

    with one_line(ValueError):
        check_selector(selector)
    return selector


def direct_json(
    urls: list[str], *, window_s: float, interval_s: float, idle_interval_s: float, api_key: str | None
) -> dict[str, Any]:
    """Scrape `urls` for `window_s` seconds at `interval_s` (an idle server at `idle_interval_s`),
    then the fleet document."""
    from mtpwatch.core.fleet.report import fleet_report
    from mtpwatch.core.fleet.scraper import FleetScraper, Target

    async def run() -> dict[str, Any]:
        scraper = FleetScraper(
            [Target(u, api_key) for u in urls], interval_s=interval_s, idle_interval_s=idle_interval_s
        )
        task = asyncio.create_task(scraper.run())
        t0 = time.monotonic()
        try:
            await asyncio.sleep(window_s + interval_s / 2)
            rows = scraper.rows(window_s)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await scraper.aclose()
        return fleet_report(
            rows,
            window_s=window_s,
            source="direct /metrics",
            extra={
                "collected_s": round(time.monotonic() - t0, 3),
                "scraping": scraper.stats.summary(),
                "scrape": scraper.scrape_modes(),
            },
        )

    return asyncio.run(run())


def prometheus_json(url: str, *, selector: str, window_s: float) -> dict[str, Any]:
    """One round of Prometheus queries → the fleet document (with the queries it ran)."""
    from mtpwatch.core.fleet.report import fleet_report
    from mtpwatch.core.sources.prometheus import PrometheusError, PrometheusSource, promql_queries

    async def run() -> dict[str, Any]:
        with one_line(ValueError):
            source = PrometheusSource(url, selector=selector)
        try:
            with one_line(PrometheusError, kind=click.ClickException):
                t = source.clock()
                read = await source.read(window_s, at=t)
        finally:
            await source.aclose()
        return fleet_report(
            read.rows,
            window_s=read.fit.window_s,
            source=f"Prometheus {source.url}",
            extra={
                "at": round(t, 3),
                "selector": selector or None,
                "store": read.fit.to_json(),
                "cost": read.stats.to_json(),
                "queries": promql_queries(read.fit.window_s, source.selector),
            },
        )

    return asyncio.run(run())


def echo_json(doc: dict[str, Any], label: str | None = None, metadata: dict[str, str] | None = None) -> None:
    """Print a fleet document, starting with its `meta` block (the rows hold each server's model and k)."""
    from mtpwatch.core.provenance import with_meta

    meta = {"source": str(doc.get("source")), **(metadata or {})}
    click.echo(dumps(with_meta(doc, label=label, metadata=meta), indent=2))
