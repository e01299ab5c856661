"""`mtpwatch.render.numbers`: one spelling per kind of number, one mark for a number not there."""

from __future__ import annotations

import math

import pytest

from mtpwatch.render import numbers as n


@pytest.mark.parametrize(
    "fmt",
    [n.fixed, n.percent, n.tok_s, n.ratio, n.ms, n.gb_s, n.count],
)
def test_none_and_nan_are_the_missing_mark(fmt: object) -> None:
    assert fmt(None) == n.MISSING  # type: ignore[operator]
    assert fmt(math.nan) == n.MISSING  # type: ignore[operator]
    assert fmt(None, none="n/a") == "n/a"  # type: ignore[operator]


def test_percent_takes_a_fraction_and_has_two_named_styles() -> None:
    assert n.percent(0.6234) == "62.3%"
    assert n.percent(0.6234, style="spaced") == "62.3 %"
    assert n.percent(0.6234, 0) == "62%"
    assert n.percent(0.0) == "0.0%"  # zero is a number, not a missing one
    assert n.percent(-0.021, signed=True) == "-2.1%" and n.percent(0.021, signed=True) == "+2.1%"


def test_each_kind_has_its_unit_and_precision() -> None:
    assert n.fixed(1.005, 2) == f"{1.005:.2f}"
    assert n.tok_s(123.456) == "123.46" and n.tok_s(123.456, 1) == "123.5"
    assert n.ratio(1.234) == "1.23x"
    assert n.ratio(1.234, mark="×") == "1.23×"
    assert n.ms(0.01234) == "12.3" and n.ms(0.01234, unit=True) == "12.3 ms"
    assert n.gb_s(273.4) == "273 GB/s"
    assert n.count(12345.0) == "12,345" and n.count(2.5) == "2.5"
    assert n.interval(1.234, 1.1, 1.356) == "1.23x [1.10, 1.36]"


def test_vector_marks_each_missing_position_and_an_empty_list() -> None:
    assert n.vector([0.812, None, 0.4]) == "0.81 — 0.40"
    assert n.vector([0.8125], 3) == "0.812"
    assert n.vector([]) == n.MISSING and n.vector(None, none="") == ""


def test_the_old_inline_spellings_are_reproduced() -> None:
    # the bench/sweep tables wrote f"{100 * x:.1f}%", compare f"{100 * x:.0f}%", snapshot and fleet
    # f"{100 * x:.1f} %", the sweep's errors f"{100 * e:+.1f}%": the formatter must spell them the same
    for x in (0.0, 0.5, 0.62345, 1.0, 0.999):
        assert n.percent(x) == f"{100 * x:.1f}%"
        assert n.percent(x, 0) == f"{100 * x:.0f}%"
        assert n.percent(x, style="spaced") == f"{100 * x:.1f} %"
        assert n.percent(x, signed=True) == f"{100 * x:+.1f}%"
