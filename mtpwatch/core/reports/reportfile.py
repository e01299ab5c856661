"""Reading saved `mtpwatch bench` reports (the `--json` files) back, for `plot` and `compare`.

The file is the contract: this module reads the JSON that the bench writes (`tool`, `points`,
`categories`, `arms`, `runs`, and the `meta` provenance block when present; a k sweep's file, `kind`
"k sweep", holds one such report per k under `bench`) without importing the bench engine, so a
report written by an older or newer mtpwatch still loads. Anything missing is None, never a guess.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtpwatch.core import gzipfile

#: `kind` of a k sweep's file: its `bench` object holds one full report per k (`parse_all`).
SWEEP_KIND = "k sweep"
#: `kind` of a context-length sweep's file (`bench --context-lengths`): its `bench` object holds one
#: full report per prompt length; each parsed report carries its length as `data["context_length"]`.
CONTEXT_KIND = "context sweep"


class ReportFileError(ValueError):
    """A file that is not a readable bench report; `str()` is one line naming the file."""


@dataclass(frozen=True, slots=True)
class Interval:
    """A median with its confidence interval, as written in the report."""

    median: float
    low: float
    high: float
    n: int


@dataclass(frozen=True, slots=True)
class Run:
    """One row of the report's `runs` list, in the order it ran."""

    order: int
    """Position in the file's `runs` list (0-based): the order the runs finished in."""
    arm: str
    prompt: str
    concurrency: int
    length: int | None
    warmup: bool
    pair: int | None
    rate: float | None
    """The speed the bench pairs: decode tok/s at concurrency 1, aggregate output tok/s above."""
    error: str | None

    @property
    def key(self) -> tuple[str, int, int | None]:
        """(prompt, concurrency, length): what identifies the same measurement in two reports."""
        return (self.prompt, self.concurrency, self.length)


@dataclass(frozen=True, slots=True)
class SavedReport:
    name: str
    """The report's `meta.label`, else the file name (`_label_or_file`)."""
    path: str
    data: Mapping[str, Any]
    runs: tuple[Run, ...]

    @property
    def meta(self) -> Mapping[str, Any]:
        """The provenance block; empty for reports written before it existed."""
        meta = self.data.get("meta")
        return meta if isinstance(meta, Mapping) else {}

    @property
    def paired(self) -> bool:
        """True for an A/B report (a speed-up exists), False for a one-server bench."""
        return "b" in (self.data.get("arms") or {})

    @property
    def speedup(self) -> Interval | None:
        """The headline speed-up B/A (primary point) with its 95 % CI."""
        return speedup_interval(self.data.get("speedup"))

    def arm(self, name: str) -> Mapping[str, Any]:
        """`arms.<name>` of the primary point ({} when absent)."""
        arms = self.data.get("arms") or {}
        value = arms.get(name)
        return value if isinstance(value, Mapping) else {}

    @property
    def k(self) -> int | None:
        """Speculative tokens of arm B: from the provenance block, else from the server's counters."""
        meta_b = (self.meta.get("arms") or {}).get("b") or {}
        values = (meta_b.get("k"), self.arm("b").get("num_speculative_tokens"))
        return next((k for k in map(_opt_int, values) if k is not None), None)

    def pairs(self) -> dict[tuple[str, int, int | None], list[tuple[float, float]]]:
        """Measured, successful (A rate, B rate) pairs grouped by (prompt, concurrency, length)."""
        a = {(r.key, r.pair): r for r in self.runs if r.arm == "a" and r.pair is not None and not r.warmup}
        out: dict[tuple[str, int, int | None], list[tuple[float, float]]] = {}
        for r in self.runs:
            if r.arm != "b" or r.pair is None or r.warmup:
                continue
            mate = a.get((r.key, r.pair))
            if mate is None or mate.error or r.error or mate.rate is None or r.rate is None or mate.rate <= 0:
                continue
            out.setdefault(r.key, []).append((mate.rate, r.rate))
        return out


def speedup_interval(obj: Any) -> Interval | None:
    """An `Interval` from a report's speed-up object (`median`, `ci_low`, `ci_high`, `pairs`)."""
    if not isinstance(obj, Mapping):
        return None
    try:
        return Interval(
            median=float(obj["median"]),
            low=float(obj["ci_low"]),
            high=float(obj["ci_high"]),
            n=int(obj.get("pairs") or 0),
        )
    except (KeyError, TypeError, ValueError):
        return None


def _opt_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def opt_float(value: Any) -> float | None:
    """A JSON number as a float; None for anything else (a boolean too)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _runs(rows: Sequence[Any], where: str) -> tuple[Run, ...]:
    out: list[Run] = []
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise ReportFileError(f"{where}: runs[{i}] is not an object")
        concurrency = _opt_int(row.get("concurrency")) or 1
        rate = opt_float(row.get("decode_tok_s") if concurrency == 1 else row.get("output_tok_s"))
        out.append(
            Run(
                order=i,
                arm=str(row.get("arm", "")),
                prompt=str(row.get("prompt", "")),
                concurrency=concurrency,
                length=_opt_int(row.get("length")),
                warmup=bool(row.get("warmup")),
                pair=_opt_int(row.get("pair")),
                rate=rate,
                error=row.get("error") if isinstance(row.get("error"), str) else None,
            )
        )
    return tuple(out)


def _label_or_file(document: Mapping[str, Any], path: str) -> str:
    """The document's `meta.label`, else the file name."""
    meta = document.get("meta")
    label = meta.get("label") if isinstance(meta, Mapping) else None
    return label if isinstance(label, str) and label else Path(path).name


def _bench_tool(document: Mapping[str, Any], path: str) -> None:
    if document.get("tool") != "mtpwatch bench":
        raise ReportFileError(f'{path}: not an mtpwatch bench report (no "tool": "mtpwatch bench")')


def parse(document: Any, *, path: str, name: str | None = None) -> SavedReport:
    """A `SavedReport` from a decoded JSON document; raises `ReportFileError` when it is not one."""
    if not isinstance(document, Mapping):
        raise ReportFileError(f"{path}: not a JSON object")
    _bench_tool(document, path)
    rows = document.get("runs") or []
    if not isinstance(rows, list):
        raise ReportFileError(f"{path}: 'runs' is not a list")
    return SavedReport(name or _label_or_file(document, path), path, document, _runs(rows, path))


def parse_all(document: Any, *, path: str) -> list[SavedReport]:
    """The reports in a decoded document: one; for a k sweep (`kind` "k sweep") one per k, named
    "k=<k> <label or file>" (k first: `compare` cuts long names); for a context-length sweep one per
    length ("ctx=<n> <file>"), shortest first. Raises `ReportFileError` when it holds none."""
    kind = document.get("kind") if isinstance(document, Mapping) else None
    if kind not in (SWEEP_KIND, CONTEXT_KIND):
        return [parse(document, path=path)]
    bench = document.get("bench")
    if kind == SWEEP_KIND:
        _bench_tool(document, path)
        if not isinstance(bench, Mapping) or not bench:
            raise ReportFileError(f"{path}: a k sweep without its per-k reports ('bench')")
        stem = _label_or_file(document, path)
        order = sorted(bench, key=lambda k: int(k) if str(k).isdigit() else 10**9)
        return [parse(bench[key], path=f"{path} (k={key})", name=f"k={key} {stem}") for key in order]
    if document.get("tool") != "mtpwatch bench" or not isinstance(bench, Mapping) or not bench:
        raise ReportFileError(f"{path}: a context-length sweep without its per-length reports ('bench')")
    keys = sorted((k for k in bench if str(k).isdigit()), key=int)
    name = Path(path).name
    return [
        parse({**bench[k], "context_length": int(k)}, path=f"{path} (length {k})", name=f"ctx={k} {name}")
        for k in keys
    ]


def _read(path: str | Path) -> Any:
    p = Path(path)
    try:
        text = gzipfile.read_text(p)
    except FileNotFoundError:
        raise ReportFileError(f"report not found: {p}") from None
    except gzipfile.CorruptFileError as exc:
        raise ReportFileError(f"cannot read report: {exc}") from None
    except UnicodeDecodeError:
        raise ReportFileError(f"cannot read {p}: not text (nor gzip), not a --json report") from None
    except OSError as exc:
        raise ReportFileError(f"cannot read {p}: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportFileError(f"{p}: not valid JSON ({exc.msg}, line {exc.lineno})") from None


def load(path: str | Path) -> SavedReport:
    """Load one `--json` file holding one report; raises `ReportFileError` with one line."""
    document = _read(path)
    if isinstance(document, Mapping) and document.get("kind") == SWEEP_KIND:
        raise ReportFileError(f"{path}: a k sweep (one report per k): read it with load_all")
    return parse(document, path=str(path))


def load_all(paths: Sequence[str | Path]) -> list[SavedReport]:
    """Load several files (a k sweep: one report per k); names that collide get the file name appended."""
    reports = [r for p in paths for r in parse_all(_read(p), path=str(p))]
    names = [r.name for r in reports]
    out: list[SavedReport] = []
    for r in reports:
        if names.count(r.name) > 1 and r.name != Path(r.path).name:
            r = SavedReport(f"{r.name} ({Path(r.path).name})", r.path, r.data, r.runs)
        out.append(r)
    return out
