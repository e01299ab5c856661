"""Fuzzing the fast /metrics parser: it raises only `MetricsFormatError`, and on valid exposition text it
gives exactly what prometheus_client gives."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from mtpwatch.core.metrics import parse as promparse
from mtpwatch.core.metrics.parse import (
    MetricsFormatError,
    parse_samples,
)
from tests.reference import same_samples
from tests.reference_metrics import parse_samples_reference

_NAME_TAIL = st.text("abcdefgh_:0123456789", min_size=1, max_size=12)
NAMES = st.builds(
    lambda p, t: p + t, st.sampled_from(["vllm:", "llamacpp:", "python_", "other:"]), _NAME_TAIL
)
# Names starting with "__" are reserved: prometheus_client rejects them (the fast parser need not).
LABEL_NAMES = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,6}", fullmatch=True).filter(
    lambda s: not s.startswith("__")
)
# Label values as written on the page: any text, with the three escapes the format defines.
LABEL_VALUES = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\n\r"), max_size=12
).map(lambda s: s.replace("\\", "\\\\").replace('"', '\\"'))
FLOATS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(-(10**12), 10**12).map(str),
    st.sampled_from(["+Inf", "-Inf", "NaN", "1e3", "-4.5E-3", "0", "-0.0", ".5", "5."]),
)
TIMESTAMPS = st.one_of(st.none(), st.integers(0, 2_000_000_000_000).map(str))


@st.composite
def sample_line(draw: st.DrawFn, name: str) -> str:
    labels = draw(st.dictionaries(LABEL_NAMES, LABEL_VALUES, max_size=4))
    line = name
    if bool(labels) or draw(st.booleans()):
        terms = [f'{k}="{v}"' for k, v in labels.items()]
        sep = draw(st.sampled_from([",", ", "]))
        trailing = "," if bool(terms) and draw(st.booleans()) else ""
        line += "{" + sep.join(terms) + trailing + "}"
    line += draw(st.sampled_from([" ", "  ", "\t"])) + draw(FLOATS)
    ts = draw(TIMESTAMPS)
    if ts is not None:
        line += " " + ts
    return line


@st.composite
def exposition(draw: st.DrawFn) -> str:
    lines: list[str] = []
    for name in draw(st.lists(NAMES, min_size=1, max_size=5, unique=True)):
        if draw(st.booleans()):
            lines.append(f"# HELP {name} {draw(st.text('abc xyz', max_size=10))}")
        if draw(st.booleans()):
            lines.append(f"# TYPE {name} {draw(st.sampled_from(['gauge', 'untyped']))}")
        seen: set[str] = set()
        for _ in range(draw(st.integers(1, 4))):
            line = draw(sample_line(name))
            key = line.split(" ")[0].split("\t")[0]
            if key in seen:  # prometheus_client keeps duplicates too, but keep the comparison simple
                continue
            seen.add(key)
            lines.append(line)
    return "\n".join(lines) + "\n"


def _fresh_caches() -> None:
    promparse._LABEL_CACHE.clear()
    promparse._NAME_CACHE.clear()


@given(exposition())
def test_valid_exposition_agrees_with_prometheus_client(text: str) -> None:
    _fresh_caches()
    ref = parse_samples_reference(text)
    cold = parse_samples(text)
    warm = parse_samples(text)  # through the label/name caches
    assert same_samples(cold, ref), (cold, ref)
    assert same_samples(warm, ref)


def _mutate(text: str, data: st.DataObject) -> str:
    ops = data.draw(st.lists(st.tuples(st.integers(0, max(len(text), 1)), st.text(max_size=3)), max_size=4))
    for pos, insert in ops:
        cut = data.draw(st.integers(0, 2))
        text = text[:pos] + insert + text[pos + cut :]
    return text


@given(exposition(), st.data())
def test_mutated_exposition_raises_only_its_own_error(text: str, data: st.DataObject) -> None:
    text = _mutate(text, data)
    _fresh_caches()
    try:
        fast = parse_samples(text)
    except MetricsFormatError as exc:
        assert "\n" not in str(exc)
        fast = None
    try:
        ref = parse_samples_reference(text)
    except MetricsFormatError:
        ref = None
    if ref is not None:
        # What prometheus_client accepts, the fast parser accepts and reads the same, except a sample
        # name the exposition format forbids (prometheus_client's text parser does not check names).
        if fast is None and any(
            s.name.startswith(promparse.DEFAULT_PREFIXES) and promparse._METRIC_NAME.match(s.name) is None
            for s in ref
        ):
            return
        assert fast is not None and same_samples(fast, ref), (text, fast, ref)


@given(st.text(max_size=200))
def test_arbitrary_text_raises_only_its_own_error(text: str) -> None:
    try:
        samples = parse_samples("vllm:" + text)
    except MetricsFormatError:
        return
    for s in samples:
        assert s.name.startswith("vllm:")
        assert isinstance(s.value, float) and (s.timestamp is None or not math.isnan(s.timestamp))
