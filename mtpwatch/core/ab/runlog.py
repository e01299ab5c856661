"""The per-run JSONL log of a bench (`--jsonl FILE`), written as runs finish, and read back to resume.

Line 1 is a header: the provenance `meta`, the whole `BenchConfig` (prompts included, so a resume
needs nothing else), and how the arms were reached (URLs, launch commands, model, chat). Every
later line is one finished run, complete enough to rebuild its `RunRecord` exactly (output text
and token ids for the lossless check, per-position counter deltas for acceptance). Each line is
flushed and fsynced when written, so a crash, Ctrl-C or a lost SSH session keeps every finished run.

A line cut short by a crash (the last one) is ignored on reading; anything else malformed is an
error naming the line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from mtpwatch.core import gzipfile
from mtpwatch.core.ab.plan import BenchConfig, Point, RunUnits, StartArm, Step
from mtpwatch.core.ab.records import RequestTiming, RunRecord
from mtpwatch.core.ab.workloads import Prompt
from mtpwatch.core.jsonout import json_safe

SCHEMA = 1
TOOL = "mtpwatch bench runs"


class RunLogError(ValueError):
    """A run log that cannot be resumed; `str()` is one line naming the file (and line)."""


def config_from_json(obj: Mapping[str, Any]) -> BenchConfig:
    """The inverse of `BenchConfig.to_json` (raises KeyError/TypeError/ValueError on a bad object)."""
    prompts = [
        Prompt(str(p["id"]), str(p["text"]), str(p["category"]), int(p["max_tokens"])) for p in obj["prompts"]
    ]
    return BenchConfig(
        prompts=prompts,
        runs=int(obj["runs"]),
        warmup=int(obj["warmup"]),
        schedule=obj["schedule"],
        lengths=tuple(int(x) for x in obj["lengths"]),
        concurrency=tuple(int(x) for x in obj["concurrency"]),
        temperature=float(obj["temperature"]),
        force_lengths=bool(obj["force_lengths"]),
    )


def record_to_json(rec: RunRecord) -> dict[str, Any]:
    """One run, complete (unlike `RunRecord.row()`, which is the report's summary of it)."""
    return {"type": "run", **rec.to_json()}


def record_from_json(obj: Mapping[str, Any]) -> RunRecord:
    """The inverse of `record_to_json`."""
    per_pos = obj.get("accepted_per_pos")
    ids = obj.get("token_ids")
    return RunRecord(
        arm=obj["arm"],
        prompt=str(obj["prompt"]),
        category=str(obj["category"]),
        point=Point(int(obj["concurrency"]), obj["length"]),
        run=int(obj["run"]),
        warmup=bool(obj["warmup"]),
        pair=obj["pair"],
        tokens=int(obj["tokens"]),
        ttft_s=obj["ttft_s"],
        decode_tok_s=obj["decode_tok_s"],
        output_tok_s=obj["output_tok_s"],
        wall_s=float(obj["wall_s"]),
        errors=int(obj["errors"]),
        error=obj["error"],
        contended=bool(obj["contended"]),
        prompt_index=int(obj["prompt_index"]),
        text=str(obj.get("text") or ""),
        token_ids=tuple(int(x) for x in ids) if ids is not None else None,
        drafts=obj.get("drafts"),
        draft_tokens=obj.get("draft_tokens"),
        accepted=obj.get("accepted"),
        accepted_per_pos=tuple(float(x) for x in per_pos) if per_pos is not None else None,
        k=obj.get("k"),
        decode_steps=obj.get("decode_steps"),
        requests=tuple(
            RequestTiming(
                int(q["tokens"]),
                q.get("ttft_s"),
                q.get("e2el_s"),
                tuple(float(g) for g in q.get("itl_s") or ()),
            )
            for q in obj.get("requests") or ()
        ),
    )


@dataclass(slots=True)
class RunLog:
    """What a run log holds: its header and the runs finished so far, in order."""

    header: dict[str, Any]
    records: list[RunRecord] = field(default_factory=list)

    @property
    def config(self) -> BenchConfig:
        """The bench configuration the log was started with."""
        try:
            return config_from_json(self.header["config"])
        except (KeyError, TypeError, ValueError) as exc:
            raise RunLogError(f"the run log's header has no usable bench configuration ({exc})") from None

    @property
    def finished(self) -> list[RunRecord]:
        """The runs a `--resume` keeps, in order: those without a failed request. A run that failed
        (its server died, a request errored) is run again, and its record stays in the log only."""
        kept: dict[tuple[str, Point, int, int], RunRecord] = {}
        for r in self.records:
            if r.errors == 0 and r.error is None:
                kept.setdefault(unit_key(r.arm, r.point, r.prompt_index, r.run), r)
        return list(kept.values())

    @property
    def failed(self) -> int:
        """Runs of the log that failed and were not run again successfully (what `--resume` re-runs)."""
        return len(done_keys(self.records) - done_keys(self.finished))

    @property
    def arms(self) -> dict[str, dict[str, Any]]:
        """How each arm was reached: {'a': {'url': ..., 'launch': ...}, ...}."""
        arms = self.header.get("arms")
        return {k: dict(v) for k, v in arms.items()} if isinstance(arms, Mapping) else {}


class RunLogWriter:
    """Appends lines to a run log; every line reaches the disk before the next run starts."""

    def __init__(self, path: Path, *, append: bool = False) -> None:
        self.path = path
        self._fh: IO[str] = path.open("a" if append else "w", encoding="utf-8")

    def _write(self, obj: Mapping[str, Any]) -> None:
        self._fh.write(json.dumps(json_safe(obj), ensure_ascii=False, allow_nan=False) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def header(
        self,
        *,
        meta: Mapping[str, Any],
        config: BenchConfig,
        arms: Mapping[str, Any],
        options: Mapping[str, Any] | None = None,
    ) -> None:
        """The first line: provenance, the configuration, how the arms are reached, other options."""
        self._write(
            {
                "type": "header",
                "tool": TOOL,
                "schema": SCHEMA,
                "meta": dict(meta),
                "config": config.to_json(),
                "arms": dict(arms),
                "options": dict(options or {}),
            }
        )

    def run(self, record: RunRecord) -> None:
        self._write(record_to_json(record))

    def note(self, text: str) -> None:
        """A line a person reads later (a resume, an interruption); ignored when resuming."""
        self._write({"type": "note", "text": text})

    def close(self) -> None:
        """Close the file (idempotent)."""
        if not self._fh.closed:
            self._fh.close()


def parse(lines: Iterable[str], *, source: str) -> RunLog:
    """A `RunLog` from the lines of a log; raises `RunLogError`."""
    items = list(lines)
    header: dict[str, Any] | None = None
    records: list[RunRecord] = []
    last = max((i for i, line in enumerate(items) if line.strip()), default=-1)
    for i, line in enumerate(items):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            if i == last and header is not None:  # a crash cut it short: that run is lost, the rest kept
                break
            raise RunLogError(f"{source}:{i + 1}: not valid JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise RunLogError(f"{source}:{i + 1}: expected a JSON object")
        kind = obj.get("type")
        if header is None:
            if kind != "header" or obj.get("tool") != TOOL:
                raise RunLogError(f"{source}: not an mtpwatch bench run log (no header line)")
            header = obj
        elif kind == "run":
            try:
                records.append(record_from_json(obj))
            except (KeyError, TypeError, ValueError) as exc:
                raise RunLogError(f"{source}:{i + 1}: not a complete run record ({exc})") from None
    if header is None:
        raise RunLogError(f"{source}: empty run log")
    return RunLog(header, records)


def load(path: Path) -> RunLog:
    """Read a run log written by `RunLogWriter`; raises `RunLogError` with one line."""
    try:
        text = gzipfile.read_text(path)
    except FileNotFoundError:
        raise RunLogError(f"run log not found: {path}") from None
    except gzipfile.CorruptFileError as exc:
        raise RunLogError(f"cannot read run log: {exc}") from None
    except UnicodeDecodeError:
        raise RunLogError(f"cannot read run log {path}: not text (nor gzip)") from None
    except OSError as exc:
        raise RunLogError(f"cannot read run log {path}: {exc.strerror or exc}") from None
    return parse(text.splitlines(), source=str(path))


def unit_key(arm: str, point: Point, prompt_index: int, run: int) -> tuple[str, Point, int, int]:
    """What identifies one planned run (a plan `Unit`) and the record that finished it."""
    return (arm, point, prompt_index, run)


def done_keys(records: Sequence[RunRecord]) -> set[tuple[str, Point, int, int]]:
    """The units these records already finished."""
    return {unit_key(r.arm, r.point, r.prompt_index, r.run) for r in records}


def resumed_plan(plan: Sequence[Step], done: Sequence[RunRecord]) -> list[Step]:
    """`plan` without the runs `done` already finished, and without server sessions left idle.

    A restart-schedule session (StartArm … StopArm) whose runs are all done is dropped whole, so a
    resumed bench does not start a 31B server only to stop it again.
    """
    finished = done_keys(done)
    out: list[Step] = []
    session: list[Step] | None = None  # the steps of the restart session under way, from its StartArm
    for step in plan:
        if isinstance(step, StartArm):
            session = [step]
        elif isinstance(step, RunUnits):
            units = tuple(u for u in step.units if unit_key(u.arm, u.point, u.prompt, u.run) not in finished)
            if units:
                (out if session is None else session).append(RunUnits(units))
        else:  # StopArm: keep the session only if some run in it is left
            if session is not None and len(session) > 1:
                out.extend([*session, step])
            session = None
    return out
