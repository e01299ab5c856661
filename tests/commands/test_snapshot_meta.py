"""`mtpwatch snapshot --json` carries the same provenance block as the bench report."""

from __future__ import annotations

import json

from click.testing import CliRunner

from mtpwatch.commands.snapshot import command
from mtpwatch.sim.harness import SimThread
from tests.datadir import DataDir


def test_snapshot_json_meta_from_a_server_and_from_a_page(data: DataDir) -> None:
    with SimThread(preset="gemma4-e4b-gb10", spec=True, speed=20) as url:
        res = CliRunner().invoke(
            command, [url, "--json", "--label", "before demo", "--metadata", "host=spark"]
        )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    meta = doc["meta"]
    assert meta["label"] == "before demo" and meta["metadata"] == {"host": "spark"}
    arm = meta["arms"]["a"]
    assert arm["url"] == url and arm["vllm_version"] == "0.32.0" and arm["k"] == 2
    assert arm["served_name"] == doc["model"]
    page = data.path("metrics-ngram-k4-after.txt")
    res = CliRunner().invoke(command, [str(page), "--json"])
    assert res.exit_code == 0, res.output
    meta = json.loads(res.stdout)["meta"]
    assert meta["metadata"] == {"page": str(page)} and meta["arms"] == {}
    assert meta["mtpwatch_version"] and meta["created_utc"].endswith("Z")
