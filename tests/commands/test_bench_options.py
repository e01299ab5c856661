"""`bench` builds one `BenchOptions` from its flags: every click parameter is a field, and back."""

from __future__ import annotations

import dataclasses

import pytest

from mtpwatch.commands.bench import command
from mtpwatch.core.ab.options import RESUME_FIXED, BenchOptions


def test_every_bench_flag_is_a_field_of_the_one_options_object() -> None:
    params = {p.name for p in command.params if p.expose_value}
    fields = {f.name for f in dataclasses.fields(BenchOptions)} - {"given", "extra"}
    assert params == fields
    assert set(RESUME_FIXED) <= fields


def test_from_params_refuses_a_name_it_does_not_know_and_keeps_what_was_typed() -> None:
    values = {f.name: None for f in dataclasses.fields(BenchOptions) if f.name not in ("given", "extra")}
    with pytest.raises(TypeError, match="no field bogus"):
        BenchOptions.from_params({**values, "bogus": 1})
    opts = BenchOptions.from_params({**values, "url": "http://h:1"}, given=["url"], extra=["--x"])
    assert opts.typed("url") and not opts.typed("ab")
    assert opts.extra == ("--x",)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.url = "http://other:2"  # type: ignore[misc]
