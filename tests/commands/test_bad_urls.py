"""Every command that takes a server URL refuses a bad one with one line (issue 40, item 5).

`snapshot http://256.1.1.1:8000` used to print httpx's 60-line traceback ending
`httpx.InvalidURL: Invalid IPv4 address`: `normalize_url` let a dotted host through that httpx refuses
at the first request. Each command is run as a user runs it, through click.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from mtpwatch.cli import cli
from mtpwatch.core.http.urls import normalize_url

BAD_URLS = [
    ("http://256.1.1.1:8000", "not a valid IPv4 address"),
    ("300.0.0.1:80", "not a valid IPv4 address"),
    ("http://1.2.3.999", "not a valid IPv4 address"),
    ("http://[::1:8000", "IPv6"),
    ("host:99999", "port"),
    ("ftp://host:21", "scheme"),
]

# Every command (and mode) that takes a server URL; `{}` is where the bad one goes.
COMMANDS = [
    ["snapshot", "{}"],
    ["snapshot", "--json", "{}"],
    ["attach", "{}"],
    ["attach", "--json", "{}"],
    ["attach", "127.0.0.1:9", "{}"],
    ["ab", "{}", "127.0.0.1:9"],
    ["ab", "127.0.0.1:9", "{}"],
    ["bench", "{}"],
    ["bench", "--ab", "{}", "127.0.0.1:9"],
    ["bench", "--ab", "127.0.0.1:9", "{}"],
    ["bench", "--sweep-k", "1,2", "{}"],
]


@pytest.mark.parametrize(("url", "fragment"), BAD_URLS)
def test_normalize_url_refuses_what_httpx_would(url: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment) as info:
        normalize_url(url)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("url", ["127.1:8000", "10.0.0.1", "my-box.local:8000"])
def test_hosts_that_worked_still_do(url: str) -> None:
    assert normalize_url(url).startswith("http://")


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda argv: " ".join(argv))
@pytest.mark.parametrize(("url", "fragment"), BAD_URLS, ids=[u for u, _ in BAD_URLS])
def test_every_command_says_one_line(argv: list[str], url: str, fragment: str) -> None:
    args = [url if a == "{}" else a for a in argv]
    result = CliRunner().invoke(cli, args)
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code in (1, 2), result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if "Error" in line]
    assert len(errors) == 1, result.output
    assert "bad server URL" in errors[0] and fragment in errors[0], errors[0]
