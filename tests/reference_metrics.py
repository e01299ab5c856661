"""Reference implementations that only tests use, moved out of `mtpwatch/` (as `tests/reference.py`).

`parse_samples_reference`: what `core.metrics.parse.parse_samples` must equal, through prometheus_client's
full parser (its OpenMetrics parser for an OpenMetrics page, else its text-format parser).
`self_check_ok`: whether a window's per-position counts add up to its accepted tokens.
`is_outlier`: the fleet's outlier rule for one value against its peers, computed directly (median and
MAD of the peers), which `core.fleet.outliers.mark_outliers` computes for a whole group at once.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from mtpwatch.core.fleet.outliers import MAD_FACTOR, MIN_PEERS, REL_FLOOR
from mtpwatch.core.metrics.parse import DEFAULT_PREFIXES, MetricsFormatError, Sample, is_openmetrics
from mtpwatch.core.metrics.rates import Rates


def _reference_samples(families: Iterable[object], prefixes: tuple[str, ...]) -> list[Sample]:
    out: list[Sample] = []
    for family in families:
        for s in family.samples:  # type: ignore[attr-defined]
            if s.name.startswith(prefixes):
                # the OpenMetrics parser gives a `Timestamp` (seconds and nanoseconds)
                stamp = None if s.timestamp is None else float(s.timestamp)
                out.append(Sample(s.name, tuple(sorted(s.labels.items())), float(s.value), stamp))
    return out


def parse_samples_reference(text: str, prefixes: tuple[str, ...] = DEFAULT_PREFIXES) -> list[Sample]:
    """The same result as `parse_samples`, through prometheus_client's full parser (slow): its
    OpenMetrics parser for an OpenMetrics page (`is_openmetrics`), else its text-format parser.

    Raises:
        MetricsFormatError: prometheus_client rejected the text.
    """
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
    from prometheus_client.parser import text_string_to_metric_families

    parser = openmetrics if is_openmetrics(text) else text_string_to_metric_families
    try:
        return _reference_samples(parser(text), prefixes)
    except (ValueError, IndexError) as exc:
        raise MetricsFormatError(f"invalid exposition text: {exc}") from None


def is_outlier(value: float, peers: Sequence[float]) -> bool:
    """The rule for one value against its peers' values (False with fewer than `MIN_PEERS` peers)."""
    if len(peers) < MIN_PEERS:
        return False
    m = statistics.median(peers)
    mad = statistics.median(abs(p - m) for p in peers)
    return abs(value - m) > max(MAD_FACTOR * mad, REL_FLOOR * abs(m))


#: |1 + Σ marginal − mean acceptance length| below this is "consistent" (float noise only).
SELF_CHECK_TOLERANCE = 1e-6


def self_check_ok(rates: Rates) -> bool | None:
    """1 + Σ marginal equals the mean acceptance length (None when there were no drafts)."""
    if rates.self_check_residual is None:
        return None
    return abs(rates.self_check_residual) <= SELF_CHECK_TOLERANCE
