"""The advisor's predictions write the same JSON through `jsonout.JsonFields` as their hand-written
`to_json` did (the old bodies are kept below as the reference)."""

from __future__ import annotations

from typing import Any

import pytest

from mtpwatch.core.jsonout import JsonFields, dumps
from mtpwatch.core.sweeps.advisor import KMeasure, KPrediction, advise, advise_sweep


def old_prediction(p: KPrediction) -> dict[str, Any]:
    return {
        "k": p.k,
        "tokens_per_step": round(p.tokens_per_step, 4),
        "step_ms": round(p.step_s * 1000, 4),
        "decode_tok_s": round(p.decode_tok_s, 3),
        "speedup": round(p.speedup, 4),
        "extrapolated": p.extrapolated,
    }


MEASURES = [KMeasure(1, 1.2, 1.8), KMeasure(2, 1.4, 2.4), KMeasure(4, 1.5, 3.2)]
SWEEP = advise_sweep(MEASURES, [0.8, 0.6, 0.4, 0.2], 20.0, range(8))
CASES: list[tuple[Any, Any]] = [
    *((p, old_prediction) for p in advise([0.8, 0.6, 0.4, 0.2], 0.03, 0.02).predictions),
    (KPrediction(5, 2.123456789, 0.0301234567, 70.98765432, 1.41975309, extrapolated=True), old_prediction),
    *((p, old_prediction) for p in SWEEP.predictions),
]


@pytest.mark.parametrize(
    ("obj", "old"), CASES, ids=[f"{type(o).__name__}-{i}" for i, (o, _) in enumerate(CASES)]
)
def test_same_json_as_the_hand_written_method(obj: Any, old: Any) -> None:
    assert isinstance(obj, JsonFields)
    assert dumps(obj.to_json()) == dumps(old(obj))
    assert dumps(obj.to_json(), indent=2) == dumps(old(obj), indent=2)
