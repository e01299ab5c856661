"""Which speculating servers may answer differently from the baseline by design (the A/B lossless line)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from mtpwatch.session.advice import lossy_reason


def _source(spec: object, spec_method: str | None, version: str | None) -> SimpleNamespace:
    """A `Source` whose `state()` says only what `advice.engine_of` reads."""
    state = SimpleNamespace(spec=spec, engine_info=None, spec_method=spec_method, version=version)
    return SimpleNamespace(state=lambda: state)


def _feed(config: dict[str, object] | None) -> SimpleNamespace:
    argv = ["vllm", "serve", "m"] + (["--speculative-config", json.dumps(config)] if config else [])
    return _source(SimpleNamespace(launch=SimpleNamespace(argv=argv)), "mtp", "0.33.0")


@pytest.mark.parametrize(
    ("verification", "expected"),
    [
        ("fly", "fly verification is lossy"),
        ("synthetic", "synthetic verification is lossy"),
        ("standard", None),
        ("block", None),
        (None, None),
    ],
)
def test_only_lossy_verification_makes_a_difference_expected(
    verification: str | None, expected: str | None
) -> None:
    config: dict[str, object] = {"method": "mtp", "num_speculative_tokens": 2}
    if verification is not None:
        config["rejection_sample_method"] = verification
    assert lossy_reason(_feed(config)) == expected


def test_a_server_it_did_not_start_is_not_called_lossy() -> None:
    feed = _source(SimpleNamespace(launch=None), None, None)
    assert lossy_reason(feed) is None
