"""The config file and MTPWATCH_* defaults, unit by unit (paths, merging, errors)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtpwatch import userconfig
from mtpwatch.userconfig import UserConfigError

COMMANDS = ("attach", "bench", "snapshot", "ab")


def test_config_path_follows_xdg(tmp_path: Path) -> None:
    home = Path("~/.config").expanduser()
    assert userconfig.config_path({}) == home / "mtpwatch" / "config.toml"
    assert userconfig.config_path({"XDG_CONFIG_HOME": str(tmp_path)}) == tmp_path / "mtpwatch" / "config.toml"
    explicit = tmp_path / "x.toml"
    assert userconfig.config_path({"MTPWATCH_CONFIG": str(explicit), "XDG_CONFIG_HOME": "/nope"}) == explicit


def test_top_level_keys_reach_every_command_and_sections_win(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        'url = "http://10.0.0.5:8000"\napi-key = "s3cret"\n[bench]\nruns = 24\nurl = "http://b:1"\n',
        encoding="utf-8",
    )
    dm = userconfig.default_map(userconfig.load_file(path), {}, COMMANDS)
    assert dm["attach"] == {"urls": ["http://10.0.0.5:8000"], "api_key": "s3cret"}
    assert dm["bench"] == {"url": "http://b:1", "api_key": "s3cret", "runs": 24}
    # snapshot's URL argument is called `source`
    assert dm["snapshot"] == {"source": "http://10.0.0.5:8000", "api_key": "s3cret"}


def test_environment_overrides_the_file() -> None:
    env = {"MTPWATCH_URL": "http://env:9", "MTPWATCH_INTERVAL": "0.5", "MTPWATCH_INSECURE": "1"}
    dm = userconfig.default_map({"url": "http://file:1", "interval": 2.0}, env, ["attach"])
    assert dm["attach"] == {"urls": ["http://env:9"], "interval": 0.5, "insecure": True}
    dm = userconfig.default_map({"fps": 10}, {"MTPWATCH_FPS": "8"}, ["attach"])
    assert dm["attach"] == {"fps": 8}


@pytest.mark.parametrize(
    ("config", "env", "message"),
    [
        ({"runs": 3}, {}, "unknown top-level key 'runs'"),
        ({"benhc": {"runs": 3}}, {}, r"unknown section \[benhc\]"),
        ({}, {"MTPWATCH_INTERVAL": "fast"}, "MTPWATCH_INTERVAL='fast': expected a number"),
        ({}, {"MTPWATCH_INSECURE": "maybe"}, "expected 1 or 0"),
        ({}, {"MTPWATCH_FPS": "fast"}, "MTPWATCH_FPS='fast': expected a whole number"),
    ],
)
def test_bad_config_is_one_line(config: dict[str, object], env: dict[str, str], message: str) -> None:
    with pytest.raises(UserConfigError, match=message) as exc:
        userconfig.default_map(config, env, COMMANDS)
    assert "\n" not in str(exc.value)


def test_bad_toml_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("url = \n", encoding="utf-8")
    with pytest.raises(UserConfigError, match=r"config file .*config\.toml") as exc:
        userconfig.load_file(path)
    assert "\n" not in str(exc.value)
    assert userconfig.load_file(tmp_path / "missing.toml") == {}
