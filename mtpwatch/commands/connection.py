"""Options shared by the commands that talk to a server: the default URL and https verification."""

from __future__ import annotations

from typing import Any

import click

from mtpwatch.commands.options import F, one_line, stacked
from mtpwatch.core.http import tls

DEFAULT_URL = "http://127.0.0.1:8000"
"""Where `vllm serve` listens by default; URL arguments default to it (or to the config's `url`)."""


def _apply(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    # Each option's callback sees only its own value: keep both in ctx.meta, configure with both.
    ctx.meta[f"mtpwatch.tls.{param.name}"] = value
    insecure = bool(ctx.meta.get("mtpwatch.tls.insecure"))
    bundle = ctx.meta.get("mtpwatch.tls.ca_bundle")
    with one_line(tls.TlsConfigError):
        tls.configure(insecure=insecure, ca_bundle=bundle)
    return value


def tls_options(func: F) -> F:
    """Add --ca-bundle FILE and --insecure (https:// only; the app, bench and snapshot honour them)."""
    return stacked(
        func,
        click.option(
            "--ca-bundle",
            type=click.Path(dir_okay=False),
            callback=_apply,
            expose_value=False,
            envvar="MTPWATCH_CA_BUNDLE",
            help="https: verify the server against this CA bundle (PEM) instead of the system's.",
        ),
        click.option(
            "--insecure",
            is_flag=True,
            callback=_apply,
            expose_value=False,
            envvar="MTPWATCH_INSECURE",
            help="https: do not verify the server's certificate (self-signed test servers only).",
        ),
    )
