"""The fast /metrics parser must give exactly what prometheus_client gives, and fail with one clear line."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from mtpwatch.core.metrics import parse as promparse
from mtpwatch.core.metrics.parse import (
    MetricsFormatError,
    Sample,
    parse_samples,
)
from mtpwatch.core.metrics.snapshot import SNAPSHOT_PREFIXES
from tests.datadir import DataDir
from tests.reference import same_samples
from tests.reference_metrics import parse_samples_reference


def test_fixtures_exist(data: DataDir) -> None:
    assert len(data.glob("metrics-*.txt")) >= 5


@pytest.mark.parametrize("prefixes", [promparse.DEFAULT_PREFIXES, SNAPSHOT_PREFIXES], ids=["all", "snapshot"])
def test_fast_equals_reference_on_fixture(metrics_page: Path, prefixes: tuple[str, ...]) -> None:
    text = metrics_page.read_text(encoding="utf-8")
    promparse._LABEL_CACHE.clear()
    promparse._NAME_CACHE.clear()
    promparse._LINE_CACHE.clear()
    cold = parse_samples(text, prefixes)
    warm = parse_samples(text, prefixes)  # second pass goes through the line and label caches
    ref = parse_samples_reference(text, prefixes)
    assert ref, "the reference found no sample: the comparison would be empty"
    assert cold == ref
    assert warm == ref
    assert all(s.name.startswith(prefixes) for s in cold)


def test_fast_path_skips_other_families(data: DataDir) -> None:
    text = data.text("metrics-ngram-k4-after.txt")
    names = {s.name for s in parse_samples(text)}
    assert any(n.startswith("vllm:spec_decode") for n in names)
    assert not any(n.startswith(("python_", "process_", "http_")) for n in names)


TRICKY = r"""# HELP vllm:x Tricky.
# TYPE vllm:x gauge
vllm:x{b="2",a="1"} 1.0
vllm:x{ a = "q\"uote" , b="back\\slash" } 2
vllm:x{a="new\nline",b="brace}{inside"} 3e+09
vllm:x{a="trailing",b="comma",} -4.5E-3
vllm:x{a="tab\tstays",b="unicode é ✓"} +Inf
vllm:x{a="neg",b="inf"} -Inf
vllm:x{a="not",b="a number"} NaN
vllm:x{a="with",b="timestamp"} 7 1700000000123
vllm:x{a="escaped\\\"both",b=""} 8
vllm:x{} 9
vllm:x 10
vllm:y_total{a="1"}   11
  vllm:indented{a="1"} 12
llamacpp:spec_decode_num_drafts_total 13
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 14
other:thing{a="1"} 15
"""
TRICKY += 'vllm:trailing_spaces{a="1"}  16   \n'  # kept out of the literal: editors strip it


def test_tricky_lines_equal_reference() -> None:
    fast = parse_samples(TRICKY)
    ref = parse_samples_reference(TRICKY)
    assert len(ref) == 16
    assert same_samples(fast, ref)


def test_tricky_values_are_decoded() -> None:
    by_value = {s.value: s for s in parse_samples(TRICKY) if not math.isnan(s.value)}
    assert by_value[1.0].labels == (("a", "1"), ("b", "2"))  # page order b,a -> sorted
    assert dict(by_value[2.0].labels)["a"] == 'q"uote'
    assert dict(by_value[2.0].labels)["b"] == "back\\slash"
    assert dict(by_value[3e9].labels)["a"] == "new\nline"
    assert dict(by_value[3e9].labels)["b"] == "brace}{inside"
    assert dict(by_value[-4.5e-3].labels)["b"] == "comma"
    assert dict(by_value[math.inf].labels)["a"] == "tab\\tstays"  # only \\, \n, \" are escapes
    assert by_value[7.0].timestamp == pytest.approx(1700000000.123)
    assert dict(by_value[8.0].labels)["a"] == 'escaped\\"both'
    assert by_value[9.0].labels == () and by_value[10.0].labels == ()
    assert any(math.isnan(s.value) for s in parse_samples(TRICKY))


def test_crlf_line_endings() -> None:
    text = 'vllm:a{x="1"} 1\r\nvllm:b 2\r\n'
    assert same_samples(parse_samples(text), parse_samples_reference(text))
    assert [s.value for s in parse_samples(text)] == [1.0, 2.0]


def test_same_samples_treats_nan_as_equal_but_not_other_differences() -> None:
    a = [Sample("vllm:a", (), math.nan)]
    assert same_samples(a, [Sample("vllm:a", (), math.nan)])
    assert not same_samples(a, [Sample("vllm:a", (), 1.0)])
    assert not same_samples(a, [Sample("vllm:b", (), math.nan)])
    assert not same_samples(a, [])


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('vllm:a{x="1" 1', "unclosed"),
        ('vllm:a{x="1"}', "no value"),
        ("vllm:a", "no value"),
        ('vllm:a{x="1"} abc', "invalid value"),
        ('vllm:a{x="1"} 1_000', "invalid value"),
        ("vllm:a 1 2 3", "unexpected text"),
        ("vllm:a 1 notatime", "invalid value"),
        ("vllm:a{x=1} 1", "invalid labels"),
        ('vllm:a{x="1" y="2"} 1', "missing comma"),
        ('vllm:a{x="1",x="2"} 1', "duplicate label"),
        ('vllm:a{9x="1"} 1', "invalid labels"),
        ('vllm:a{x="unterminated} 1', "invalid labels"),
        ("vllm:a-b 1", "invalid metric name"),
    ],
)
def test_malformed_line_raises_with_line_number(line: str, why: str) -> None:
    text = "# HELP vllm:a A.\n# TYPE vllm:a gauge\nvllm:ok 1\n" + line + "\nvllm:after 2\n"
    with pytest.raises(MetricsFormatError) as err:
        parse_samples(text)
    message = str(err.value)
    assert message.startswith("line 4:")
    assert why in message
    assert "\n" not in message


def test_reference_errors_are_metrics_format_errors() -> None:
    with pytest.raises(MetricsFormatError):
        parse_samples_reference('vllm:a{x="1" 1\n')


def test_malformed_line_outside_kept_families_is_ignored() -> None:
    text = "python_broken{x= 1\nvllm:a 1\n"
    assert parse_samples(text) == [Sample("vllm:a", (), 1.0)]


def test_empty_and_non_metrics_text() -> None:
    assert parse_samples("") == []
    assert parse_samples("<html><body>Not Found</body></html>") == []
    assert parse_samples("vllm:a 1\n", prefixes=()) == []


def test_label_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(promparse, "_CACHE_MAX", 4)
    promparse._LABEL_CACHE.clear()
    text = "".join(f'vllm:a{{i="{i}"}} {i}\n' for i in range(10))
    samples = parse_samples(text)
    assert [s.value for s in samples] == [float(i) for i in range(10)]
    assert len(promparse._LABEL_CACHE) <= 4


def test_line_cache_follows_changed_values_and_still_rejects_bad_lines(data: DataDir) -> None:
    """The next scrape of a busy server: some lines moved, most did not; each result equals the
    reference, and a line cached as valid does not let a malformed neighbour through."""
    before = data.text("metrics-ngram-k4-before.txt")
    after = data.text("metrics-ngram-k4-after.txt")
    promparse._LINE_CACHE.clear()
    for text in (before, after, before):
        assert parse_samples(text) == parse_samples_reference(text)
    assert promparse._LINE_CACHE  # the lines were kept
    line = next(x for x in after.split("\n") if x.startswith("vllm:generation_tokens_total"))
    with pytest.raises(MetricsFormatError, match="invalid value"):
        parse_samples(after.replace(line, line + "x"))
    assert parse_samples(after) == parse_samples_reference(after)


def test_line_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(promparse, "_LINE_CACHE_MAX", 5)
    promparse._LINE_CACHE.clear()
    for step in range(3):
        text = "".join(f'vllm:a{{i="{i}"}} {i + step}\n' for i in range(12))
        assert [s.value for s in parse_samples(text)] == [float(i + step) for i in range(12)]
        assert len(promparse._LINE_CACHE) <= 5
