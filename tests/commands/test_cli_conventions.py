"""CLI conventions end to end: default URL, config file, MTPWATCH_* variables, https options, completion."""

from __future__ import annotations

import http.server
import json
import shutil
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from mtpwatch.cli import cli
from mtpwatch.core.http import tls
from mtpwatch.sim.harness import SimThread
from tests.datadir import DataDir

MTPWATCH = Path(sys.executable).with_name("mtpwatch")


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with SimThread(preset="gemma4-e4b-gb10", spec=True, speed=20) as url:
        yield url


@pytest.fixture(autouse=True)
def _reset_tls() -> Iterator[None]:
    yield
    tls.configure()


def _config(tmp_path: Path, text: str) -> dict[str, str]:
    path = tmp_path / "config.toml"
    path.write_text(text, encoding="utf-8")
    return {"MTPWATCH_CONFIG": str(path)}


def test_url_from_config_file_and_environment(sim_url: str, tmp_path: Path) -> None:
    env = _config(tmp_path, f'url = "{sim_url}"\n')
    res = CliRunner(env=env).invoke(cli, ["snapshot", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["source"] == sim_url
    # MTPWATCH_URL beats the file
    env_url = CliRunner(env={**env, "MTPWATCH_URL": "http://127.0.0.1:9"}).invoke(cli, ["snapshot"])
    assert env_url.exit_code == 1 and "127.0.0.1:9" in env_url.output
    # the command line beats both
    res = CliRunner(env={**env, "MTPWATCH_URL": "http://127.0.0.1:9"}).invoke(cli, ["snapshot", sim_url])
    assert res.exit_code == 0, res.output


def test_per_command_section_and_variable(sim_url: str, tmp_path: Path) -> None:
    env = _config(tmp_path, f'[snapshot]\nsource = "{sim_url}"\njson = true\n')
    res = CliRunner(env=env).invoke(cli, ["snapshot"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["source"] == sim_url
    # click's per-command variable, MTPWATCH_<COMMAND>_<OPTION>
    res = CliRunner(env={"MTPWATCH_SNAPSHOT_MODEL": "no-such-model"}).invoke(cli, ["snapshot", sim_url])
    assert res.exit_code == 1 and "no-such-model" in res.output


def test_config_mistakes_are_one_line(tmp_path: Path) -> None:
    res = CliRunner(env=_config(tmp_path, "[snapshot]\njsno = true\n")).invoke(cli, ["snapshot"])
    assert res.exit_code == 1
    assert res.output.startswith("Error: config file: [snapshot] has no option 'jsno'; options: ")
    assert "json" in res.output
    assert len(res.output.strip().splitlines()) == 1
    res = CliRunner(env=_config(tmp_path, "url = [\n")).invoke(cli, ["snapshot"])
    assert res.exit_code == 1 and res.output.startswith("Error: config file ")


def test_url_defaults_to_vllms_port() -> None:
    res = CliRunner().invoke(cli, ["snapshot"])
    # whatever listens there (or nothing), the default URL is vLLM's
    assert "127.0.0.1:8000" in res.output or res.exit_code == 0


# --- https ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def https_url(tmp_path_factory: pytest.TempPathFactory, data: DataDir) -> Iterator[tuple[str, Path]]:
    """A loopback https server with a self-signed certificate serving a real vLLM /metrics page."""
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    openssl = shutil.which("openssl")
    assert openssl, "openssl is needed to make a test certificate"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    page = data.path("metrics-ngram-k4-after.txt").read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", cert
    finally:
        server.shutdown()
        server.server_close()


def test_https_verification_options(https_url: tuple[str, Path], tmp_path: Path) -> None:
    url, cert = https_url
    plain = CliRunner().invoke(cli, ["snapshot", url])
    assert plain.exit_code == 1 and "Traceback" not in plain.output
    assert "certificate" in plain.output.lower() and len(plain.output.strip().splitlines()) == 1
    for extra in (["--insecure"], ["--ca-bundle", str(cert)]):
        res = CliRunner().invoke(cli, ["snapshot", url, "--json", *extra])
        assert res.exit_code == 0, (extra, res.output)
        assert json.loads(res.stdout)["acceptance_rate"] is not None
    # the same through the environment and the config file
    res = CliRunner(env={"MTPWATCH_CA_BUNDLE": str(cert)}).invoke(cli, ["snapshot", url])
    assert res.exit_code == 0, res.output
    res = CliRunner(env=_config(tmp_path, f'ca_bundle = "{cert}"\n')).invoke(cli, ["snapshot", url])
    assert res.exit_code == 0, res.output
    both = CliRunner().invoke(cli, ["snapshot", url, "--insecure", "--ca-bundle", str(cert)])
    assert both.exit_code == 2 and "contradict" in both.output
    missing = CliRunner().invoke(cli, ["snapshot", url, "--ca-bundle", str(tmp_path / "none.pem")])
    assert missing.exit_code == 2 and "CA bundle not found" in missing.output
    not_pem = tmp_path / "x.pem"
    not_pem.write_text("hello", encoding="utf-8")
    bad = CliRunner().invoke(cli, ["snapshot", url, "--ca-bundle", str(not_pem)])
    assert bad.exit_code == 2 and "not a PEM certificate file" in bad.output


# --- shell completion (the README's lines) --------------------------------------------------------


def test_shell_completion_scripts_and_answers() -> None:
    for shell in ("bash", "zsh", "fish"):
        script = subprocess.run(
            [str(MTPWATCH)], env={"_MTPWATCH_COMPLETE": f"{shell}_source", "PATH": "/usr/bin:/bin"},
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout  # fmt: skip
        assert "_MTPWATCH_COMPLETE" in script, shell
    answer = subprocess.run(
        [str(MTPWATCH)],
        env={"_MTPWATCH_COMPLETE": "bash_complete", "COMP_WORDS": "mtpwatch pl", "COMP_CWORD": "1",
             "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert "plain,plot" in answer.splitlines()
    options = subprocess.run(
        [str(MTPWATCH)],
        env={"_MTPWATCH_COMPLETE": "bash_complete", "COMP_WORDS": "mtpwatch bench --sch", "COMP_CWORD": "2",
             "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert "plain,--schedule" in options.splitlines()


# --- the theme: MTPWATCH_THEME / config -> --theme -> the app -------------------------------------


def _attach_params(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> dict[str, object]:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    ctx = cli.make_context("mtpwatch", ["attach", *args])
    command = cli.get_command(ctx, "attach")
    assert command is not None
    sub = command.make_context("attach", list(args), parent=ctx)
    return dict(sub.params)


def test_theme_interval_url_defaults_reach_attach(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env = {**_config(tmp_path, 'interval = 1.0\ntheme = "gruvbox"\n'), "MTPWATCH_THEME": "nord"}
    params = _attach_params(env, monkeypatch, [])
    assert params["theme"] == "nord" and params["interval"] == 1.0  # not the default (0.5)
    assert params["urls"] == ()  # no URL: attach watches http://127.0.0.1:8000
    assert _attach_params({}, monkeypatch, ["--theme", "dracula"])["theme"] == "dracula"
    assert _attach_params({"MTPWATCH_URL": "http://10.0.0.5:8000"}, monkeypatch, [])["urls"] == (
        "http://10.0.0.5:8000",
    )


async def test_the_app_uses_the_theme() -> None:
    from mtpwatch.commands.options import display_settings
    from mtpwatch.config import AppConfig, ServerSpec
    from mtpwatch.ui.app import MtpWatchApp

    common: dict[str, object] = {
        "chat": False, "max_tokens": 8, "temperature": 0.0, "interval": 0.25, "gpu": None,
        "peak_gbps": None, "model_config": None,
    }  # fmt: skip
    with pytest.raises(click.UsageError, match="unknown theme 'neon'"):
        display_settings(**common, theme="neon")
    settings = display_settings(**common, theme="nord")
    app = MtpWatchApp(
        AppConfig(servers=[ServerSpec(label="x", url="http://127.0.0.1:9")], display=settings),
        autostart=False,
    )
    async with app.run_test(size=(100, 30)):
        assert app.theme == "nord"
