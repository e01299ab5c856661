"""Defaults for the flags people repeat: a TOML config file and `MTPWATCH_*` environment variables.

The file is ``$MTPWATCH_CONFIG``, else ``$XDG_CONFIG_HOME/mtpwatch/config.toml``, else
``~/.config/mtpwatch/config.toml``. Top-level keys (`GLOBAL_KEYS`: `url` is the URL argument's
default) apply to every command that has the option; a table named after a command (``[bench]``)
applies to that command only; the README shows a file.

`MTPWATCH_URL`, `MTPWATCH_API_KEY`, `MTPWATCH_INTERVAL`, `MTPWATCH_FPS`, `MTPWATCH_THEME`,
`MTPWATCH_CA_BUNDLE` and `MTPWATCH_INSECURE` override the file's top-level keys. Precedence,
highest first: the command line, a per-command variable (`MTPWATCH_BENCH_RUNS`, click's
convention), `VLLM_API_KEY` for --api-key, `MTPWATCH_*` above, the file, the built-in default. Keys
may be written with dashes or underscores.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

#: Top-level keys the file may hold (each applies to every command that has the option).
GLOBAL_KEYS = ("url", "api_key", "interval", "fps", "theme", "ca_bundle", "insecure")

#: Environment variable -> top-level key.
ENV_KEYS: dict[str, str] = {f"MTPWATCH_{key.upper()}": key for key in GLOBAL_KEYS}

#: Where a top-level key lands for commands whose parameter has another name.
ALIASES: dict[str, dict[str, str]] = {"snapshot": {"url": "source"}, "attach": {"url": "urls"}}

#: Parameters that take several values (the key's one value becomes a list of one).
LIST_PARAMS = frozenset({"urls"})


class UserConfigError(ValueError):
    """A config file or variable that cannot be used; `str()` is one line naming it."""


def config_path(env: Mapping[str, str] | None = None) -> Path:
    """The config file's path (it need not exist)."""
    env = os.environ if env is None else env
    explicit = env.get("MTPWATCH_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    base = env.get("XDG_CONFIG_HOME") or str(Path("~/.config").expanduser())
    return Path(base) / "mtpwatch" / "config.toml"


def _key(name: str) -> str:
    return name.strip().replace("-", "_")


def load_user_config(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The config file's contents: the default file may be absent ({}), a named one must exist.

    A `MTPWATCH_CONFIG` that names no file is a typo to report, not a reason to run on defaults
    (`MTPWATCH_CONFIG=/dev/null` runs on the built-in defaults).
    """
    env = os.environ if env is None else env
    path = config_path(env)
    explicit = env.get("MTPWATCH_CONFIG")
    if explicit and (path.is_dir() or not path.exists()):  # /dev/null: no config at all
        what = "is a folder, not a config file" if path.is_dir() else "no such file"
        default = config_path({**env, "MTPWATCH_CONFIG": ""})
        raise UserConfigError(f"MTPWATCH_CONFIG={explicit}: {what} (unset it to use {default})")
    return load_file(path)


def load_file(path: Path) -> dict[str, Any]:
    """The file's contents ({} when it does not exist); raises `UserConfigError`."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise UserConfigError(f"cannot read config file {path}: {exc}") from None
    try:
        data: dict[str, Any] = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserConfigError(f"config file {path}: {exc}") from None
    return data


def _env_value(name: str, key: str, raw: str) -> Any:
    if key == "interval":
        try:
            return float(raw)
        except ValueError:
            raise UserConfigError(f"{name}={raw!r}: expected a number of seconds") from None
    if key == "fps":
        try:
            return int(raw)
        except ValueError:
            raise UserConfigError(f"{name}={raw!r}: expected a whole number of redraws a second") from None
    if key == "insecure":
        lowered = raw.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off", ""):
            return False
        raise UserConfigError(f"{name}={raw!r}: expected 1 or 0")
    return raw


def default_map(
    config: Mapping[str, Any], env: Mapping[str, str], commands: Iterable[str]
) -> dict[str, dict[str, Any]]:
    """click's `default_map`: per command, its defaults (top-level keys, env, then its own table)."""
    names = list(commands)
    top: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    for raw_key, value in config.items():
        key = _key(raw_key)
        if isinstance(value, dict):
            if raw_key not in names:
                raise UserConfigError(
                    f"config file: unknown section [{raw_key}]; "
                    f"sections are command names: {', '.join(names)}"
                )
            sections[raw_key] = {_key(k): v for k, v in value.items()}
        elif key in GLOBAL_KEYS:
            top[key] = value
        else:
            raise UserConfigError(
                f"config file: unknown top-level key {raw_key!r}; top-level keys: {', '.join(GLOBAL_KEYS)} "
                "(put other options under [command])"
            )
    for name, key in ENV_KEYS.items():
        raw = env.get(name)
        if raw is not None and raw != "":
            top[key] = _env_value(name, key, raw)
    out: dict[str, dict[str, Any]] = {}
    for command in names:
        merged = dict(top)
        for key, alias in ALIASES.get(command, {}).items():
            if key in merged:
                value = merged.pop(key)
                merged[alias] = [value] if alias in LIST_PARAMS else value
        merged.update(sections.get(command, {}))
        if merged:
            out[command] = merged
    return out


def resolve_section(command: str, defaults: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """A command's defaults keyed by its parameter names; fail with one line on an unknown option.

    `names` maps every spelling a user may write (the long flag without dashes, with `_` for `-`,
    and the parameter's own name) to the parameter name: `json = true` sets `--json`, whose
    parameter is called `as_json`.
    """
    out: dict[str, Any] = {}
    for key, value in defaults.items():
        if key in names:
            out[names[key]] = value
        elif key in GLOBAL_KEYS or key in ALIASES.get(command, {}).values():
            out[key] = value  # a top-level key this command has no option for: ignored by click
        else:
            spelled = sorted(set(names) - {"help"})
            raise UserConfigError(
                f"config file: [{command}] has no option {key!r}; options: {', '.join(spelled)}"
            )
    return out
