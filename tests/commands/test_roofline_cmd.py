"""`mtpwatch roofline`: the table says where numbers come from, JSON has the fields, errors are one line."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from mtpwatch.commands.roofline import command
from tests.datadir import DataDir


def test_cli_table_says_analytic_and_json_has_the_fields() -> None:
    runner = CliRunner()
    args = [
        "--config",
        "gemma-4-31B-it",
        "--drafter-config",
        "gemma-4-31B-it-assistant",
        "--gpu",
        "GB10",
        "-k",
        "4",
        "--acceptance-length",
        "3",
        "--dtype",
        "nvfp4",
    ]
    table = runner.invoke(command, args)
    assert table.exit_code == 0, table.output
    rows = [line for line in table.output.splitlines() if "GB" in line and "/ step" in line]
    assert rows and all("analytic" in line for line in rows)
    out = runner.invoke(command, [*args, "--json"])
    doc = json.loads(out.output)
    assert doc["peak_gbps"] == 273 and doc["k"] == 4 and doc["inputs"]["weight_dtype"] == "nvfp4"
    assert doc["ceiling_tok_s_spec"] == pytest.approx(3 * 273e9 / doc["total_bytes_per_step"])


@pytest.mark.parametrize(
    "args",
    [
        ["--config", "no-such-model", "--gpu", "GB10"],
        ["--config", "gemma-4-E4B-it", "--gpu", "Voodoo 5"],
        ["--config", "gemma-4-E4B-it", "--gpu", "GB10", "--dtype", "q9"],
        ["--config", "gemma-4-E4B-it", "--gpu", "GB10", "-k", "2", "--acceptance-length", "9"],
        ["--config", "gemma-4-E4B-it", "--gpu", "GB10", "--acceptance", "0.5", "--acceptance-length", "2"],
    ],
)
def test_cli_errors_are_one_line(args: list[str]) -> None:
    result = CliRunner().invoke(command, args)
    assert result.exit_code == 1
    assert len(result.output.strip().splitlines()) == 1 and "error:" in result.output
    assert "Traceback" not in result.output


def test_cli_peak_override_for_an_unknown_gpu(data: DataDir) -> None:
    result = CliRunner().invoke(
        command,
        [
            "--config",
            str(data.path("configs/dense-bf16.json")),
            "--gpu",
            "MyCard",
            "--peak-gbps",
            "500",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["peak_gbps"] == 500


@pytest.mark.parametrize(
    "option", ["--tok-s", "--weights-gb", "--active-params", "--peak-gbps", "--peak-tflops"]
)
@pytest.mark.parametrize("value", ["-5", "0"])
def test_negative_or_zero_inputs_are_refused_in_one_line(option: str, value: str) -> None:
    """`roofline --tok-s -5` printed '-114 % of the ceiling' (issue 40, item 9)."""
    result = CliRunner().invoke(command, ["--config", "gemma-4-31B-it", "--gpu", "GB10", option, value])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "% of the ceiling" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and option in errors[0] and "range" in errors[0], result.output
