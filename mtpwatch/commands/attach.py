"""`mtpwatch attach URL`: watch a running vLLM server and send it prompts."""

from __future__ import annotations

import sys

import click

from mtpwatch.commands.options import (
    checked_record,
    checked_url,
    display_options,
    display_settings,
    record_option,
)
from mtpwatch.config import AppConfig, ServerSpec


@click.command("attach")
@click.argument("url")
@click.option("--model", default=None, help="model_name to watch when the server serves several.")
@click.option("--api-key", default=None, envvar="VLLM_API_KEY", help="Bearer token (default: $VLLM_API_KEY).")
@display_options
@record_option
def command(url: str, model: str | None, api_key: str | None, record: str | None, **display: object) -> None:
    """Watch a running vLLM server at URL (e.g. http://127.0.0.1:8000) and send it prompts."""
    base = checked_url(url)
    settings = display_settings(**display)  # type: ignore[arg-type]
    config = AppConfig(
        servers=[ServerSpec(label=base, url=base, model=model, api_key=api_key)],
        display=settings,
        record=checked_record(record),
    )
    from mtpwatch.ui.app import run_app  # lazy: Textual loads only for the UI

    sys.exit(run_app(config))
