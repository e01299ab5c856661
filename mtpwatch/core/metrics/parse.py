"""Prometheus text exposition (or OpenMetrics 1.0) → samples: the fast filtered parser (hot path).

The app scrapes `/metrics` several times a second. prometheus_client's full parser spends 11–15 ms on
vLLM's 54 KB page, most of it on families mtpwatch never reads (python_*, process_*, http_*). The fast
path keeps only the lines whose name starts with one of a few prefixes (`vllm:`, `llamacpp:`) and
parses those with `str` methods; label blocks repeat scrape after scrape, so their parsed form is
cached. The tests assert that it gives what prometheus_client's parser gives on every fixture
(`tests/reference_metrics.py`) and the overhead benchmark times both.

OpenMetrics 1.0 (`application/openmetrics-text`, what vLLM's Rust frontend serves:
`rust/src/server/src/routes/metrics.rs` of the vLLM 0.33/0.34 sdist, through the `prometheus-client`
crate's encoder) is the same sample syntax with three differences the fast path handles: the page ends
with `# EOF` (how it is recognised, `is_openmetrics`), a timestamp is in seconds (not milliseconds),
and a sample may carry an exemplar (` # {…} value`, dropped). Counter families are typed without
`_total` but their samples keep it, so the sample names are the same as on a Prometheus page.
"""

from __future__ import annotations

import re
from typing import NamedTuple

#: Metric-name prefixes mtpwatch reads (vLLM and llama.cpp's server).
DEFAULT_PREFIXES: tuple[str, ...] = ("vllm:", "llamacpp:")


def is_openmetrics(text: str) -> bool:
    """True for an OpenMetrics page: it ends with `# EOF` (a Prometheus page never does)."""
    return text.endswith(("# EOF\n", "# EOF"))


def _exemplar_start(line: str) -> int:
    """Where an OpenMetrics exemplar (` # {…} value`) starts in a sample line, or -1: the first ` # `
    outside a quoted label value."""
    at = line.find(" # ")
    while at >= 0 and (line.count('"', 0, at) - line.count('\\"', 0, at)) % 2:
        at = line.find(" # ", at + 1)
    return at


class MetricsFormatError(ValueError):
    """Malformed Prometheus exposition text; `str()` is one line naming the offending line."""


class Sample(NamedTuple):
    """One exposition sample (immutable; a NamedTuple because the hot path builds hundreds per scrape)."""

    name: str
    """Full exported sample name, e.g. `vllm:spec_decode_num_drafts_total`, `…_bucket`, `…_created`."""
    labels: tuple[tuple[str, str], ...]
    """(name, value) pairs sorted by label name (the page's order is not significant), unescaped."""
    value: float
    """Sample value; `+Inf`, `-Inf` and `NaN` are floats too."""
    timestamp: float | None = None
    """Optional exposition timestamp in seconds (the page writes milliseconds), as prometheus_client."""


# One label term: name = "value" followed by a comma or the end; the value may hold escaped characters.
_LABEL_TERM = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,?)', re.DOTALL)
# Same escapes as the exposition format (and prometheus_client): \\, \n, \". Others stay as written.
_ESCAPE = re.compile(r'\\[\\n"]')
_ESCAPES = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")

# Parsed label blocks and names (module docstring), bounded: churning label values cannot grow them.
_LABEL_CACHE: dict[str, tuple[tuple[str, str], ...]] = {}
_NAME_CACHE: set[str] = set()
_CACHE_MAX = 8192
# Whole lines too: between two scrapes most lines of a page are byte for byte the same (every line
# of an idle server's families, most histogram buckets of a busy one), and a dict lookup is several
# times cheaper than parsing the line again. Only lines that parsed are kept.
_LINE_CACHE: dict[str, Sample] = {}
_LINE_CACHE_MAX = 4096


def _parse_labels(block: str) -> tuple[tuple[str, str], ...]:
    """Parse the text between `{` and `}`; raises ValueError (one short reason) on anything malformed."""
    labels: dict[str, str] = {}
    pos = 0
    end = len(block)
    while pos < end and block[pos:].strip():
        m = _LABEL_TERM.match(block, pos)
        if m is None:
            raise ValueError("invalid labels")
        key, raw, comma = m.group(1), m.group(2), m.group(3)
        if key in labels:
            raise ValueError(f"duplicate label {key!r}")
        labels[key] = _ESCAPE.sub(lambda esc: _ESCAPES[esc.group(0)], raw) if "\\" in raw else raw
        pos = m.end()
        if not comma and block[pos:].strip():
            raise ValueError("missing comma between labels")
    return tuple(sorted(labels.items()))


def _bad_line(text: str, line: str, why: str) -> MetricsFormatError:
    # The line number is found only on error, so the hot loop need not count lines.
    lines = (i + 1 for i, candidate in enumerate(text.split("\n")) if candidate.strip() == line.strip())
    return MetricsFormatError(f"line {next(lines, 0)}: {why}: {line[:100]!r}")


def parse_samples(text: str, prefixes: tuple[str, ...] = DEFAULT_PREFIXES) -> list[Sample]:
    """Parse the samples whose line starts with one of `prefixes` (the fast path). Comment lines
    (`# HELP`, `# TYPE`) and every other family are skipped without being parsed, so a malformed line
    in a family mtpwatch does not read is not an error. Label escapes (`Sample.labels`), `+Inf`/`NaN`,
    exponents and optional timestamps are handled as in prometheus_client. Raises MetricsFormatError
    when a kept line is malformed (the message names its line number)."""
    lines = text.split("\n")
    if "\n " in text or "\n\t" in text or text[:1] in (" ", "\t"):
        # Rare: indented sample lines (prometheus_client strips every line).
        lines = [line.strip() for line in lines]
    kept = [line for line in lines if line.startswith(prefixes)]
    om = is_openmetrics(text)
    out: list[Sample] = []
    append = out.append
    label_cache = _LABEL_CACHE
    name_cache = _NAME_CACHE
    line_cache = _LINE_CACHE
    seen = line_cache.get
    # One loop with everything inlined: this is the scrape hot path (a few hundred lines, 4 times a second).
    for line in kept:
        known = seen(line)
        if known is not None:
            append(known)
            continue
        key = line
        if om and " # " in line:
            cut = _exemplar_start(line)
            if cut >= 0:
                line, key = line[:cut], ""  # an exemplar: not kept in the line cache
        brace = line.find("{")
        if brace >= 0:
            name = line[:brace].rstrip()
            close = line.rfind("}")
            if close < brace:
                raise _bad_line(text, line, "unclosed label block")
            block = line[brace + 1 : close]
            labels = label_cache.get(block)
            if labels is None:
                try:
                    labels = _parse_labels(block)
                except ValueError as exc:
                    raise _bad_line(text, line, str(exc)) from None
                if len(label_cache) >= _CACHE_MAX:
                    label_cache.clear()
                label_cache[block] = labels
            rest = line[close + 1 :].split()
        else:
            rest = line.split()
            name = rest.pop(0)
            labels = ()
        if name not in name_cache:
            if _METRIC_NAME.match(name) is None:
                raise _bad_line(text, line, "invalid metric name")
            if len(name_cache) >= _CACHE_MAX:
                name_cache.clear()
            name_cache.add(name)
        if len(rest) == 1 and "_" not in rest[0]:
            try:
                sample = Sample(name, labels, float(rest[0]))
            except ValueError:
                raise _bad_line(text, line, "invalid value or timestamp") from None
        else:
            sample = _timestamped(text, line, name, labels, rest, om)
            key = ""  # not cached: the same line means another time in the other format
        if key:
            if len(line_cache) >= _LINE_CACHE_MAX:
                line_cache.clear()
            line_cache[key] = sample
        append(sample)
    return out


def _timestamped(
    text: str, line: str, name: str, labels: tuple[tuple[str, str], ...], rest: list[str], om: bool
) -> Sample:
    """A sample line with a timestamp (or a malformed one): OpenMetrics writes seconds, the
    Prometheus text format milliseconds."""
    n = len(rest)
    if n == 0:
        raise _bad_line(text, line, "no value")
    if n > 2:
        raise _bad_line(text, line, "unexpected text after the value")
    # float() accepts '1_000'; the exposition format (and prometheus_client) does not.
    try:
        if n == 2 and "_" not in rest[0] and "_" not in rest[1]:
            stamp = float(rest[1])
            return Sample(name, labels, float(rest[0]), stamp if om else stamp / 1000.0)
    except ValueError:
        pass
    raise _bad_line(text, line, "invalid value or timestamp")
