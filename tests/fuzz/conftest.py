"""Hypothesis profiles for the fuzz tests.

`fuzz-fast` (the default) keeps the fast suite quick and deterministic: a fixed number of examples from a
derandomised seed, no example database written into the checkout. `fuzz-long` is for a longer hunt
(random seeds; `--timeout=0` lifts the suite's 300 s per-test limit):

    .venv/bin/python -m pytest -q -p no:randomly tests/fuzz --hypothesis-profile=fuzz-long --timeout=0 \
        --hypothesis-show-statistics
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

_COMMON = settings(
    deadline=None,  # a shared 2-core machine: wall time per example is noise, not a failure
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
    print_blob=True,
)
settings.register_profile("fuzz-fast", _COMMON, max_examples=150, derandomize=True)
settings.register_profile("fuzz-long", _COMMON, max_examples=5_000)
settings.load_profile("fuzz-fast")
