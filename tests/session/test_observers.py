"""A feed tells its observers everything a recording needs, and nothing in the app reads another
object's private attributes (the recorder, the replay and the results file used to) or writes another
object's attributes (the replay, the Prometheus feed and F6's arm used to write a feed's)."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import threading
from pathlib import Path
from typing import Any

from mtpwatch.config import DisplaySettings, ServerSpec
from mtpwatch.core.http.generation import GenerationResult, StreamEvent
from mtpwatch.core.roofline.nvml import HardwareReading
from mtpwatch.session.observers import FeedObserver
from mtpwatch.session.watch import ServerFeed
from mtpwatch.sim.harness import running_sim

ROOT = Path(__file__).resolve().parents[2]


class Log:
    """A `FeedObserver` that keeps what it was told, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def server(self, t: float, identity: dict[str, Any]) -> None:
        self.calls.append(("server", identity))

    def life(self, t: float, what: str, detail: str = "") -> None:
        self.calls.append(("life", what))

    def scrape(self, t: float, text: str, via: str = "") -> None:
        self.calls.append(("scrape", text))

    def down(self, t: float, reason: str) -> None:
        self.calls.append(("down", reason))

    def prompt(self, t: float, text: str) -> None:
        self.calls.append(("prompt", text))

    def event(self, event: StreamEvent) -> None:
        self.calls.append(("event", event))

    def result(self, t: float, result: GenerationResult) -> None:
        self.calls.append(("result", result))

    def end(self, t: float) -> None:
        self.calls.append(("end", t))

    def done(self, t: float) -> None:
        self.calls.append(("done", t))

    def nvml(self, t: float, reading: HardwareReading | None) -> None:
        self.calls.append(("nvml", reading))

    def kinds(self) -> list[str]:
        """The kinds told, with repeats of one kind in a row folded into one."""
        out: list[str] = []
        for kind, _ in self.calls:
            if not out or out[-1] != kind:
                out.append(kind)
        return out


async def test_a_prompt_is_told_in_order_with_everything_a_record_needs() -> None:
    async with running_sim(speed=50) as url:
        feed = ServerFeed(ServerSpec(label="A", url=url), DisplaySettings(max_tokens=24))
        log, late = Log(), Log()
        observer: FeedObserver = log  # the protocol, checked by mypy where the app uses it
        feed.observers.append(observer)
        try:
            await feed.poll()
            feed.observers.append(late)
            answer = await feed.generate("Say something.", lambda text: None)
        finally:
            await feed.close()
    assert log.kinds() == ["server", "scrape", "prompt", "event", "result", "end", "scrape", "done"]
    assert late.kinds() == ["prompt", "event", "result", "end", "scrape", "done"]  # told from when it joined
    identity = log.calls[0][1]
    assert identity["label"] == "A" and identity["model"] == feed.watch.model
    assert identity["bandwidth"]["simulated"] is True  # the roofline's inputs travel with it
    assert log.calls[1][1].startswith("# HELP") or "vllm:" in log.calls[1][1]
    told = "".join(e.text for kind, e in log.calls if kind == "event")
    assert told == answer.text and answer.summary.tokens > 0
    feed.observers.clear()
    assert len(feed.observers) == 0


async def test_a_failed_scrape_is_told_once_with_its_reason() -> None:
    async with running_sim() as url:
        pass  # the simulator is gone: its port refuses
    feed = ServerFeed(ServerSpec(label="A", url=url), DisplaySettings())
    log = Log()
    feed.observers.append(log)
    try:
        await feed.poll()
    finally:
        await feed.close()
    assert [kind for kind, _ in log.calls] == ["down"]
    assert log.calls[0][1] == feed.watch.reason or feed.watch.reason in log.calls[0][1]


def _private_reads(path: Path) -> list[str]:
    """`x._name` where x is not self/cls and `_name` is not defined in the same module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
            own.add(node.attr)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls", "super"):
            continue
        if node.attr in own:
            continue
        out.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.attr}")
    return out


def test_no_module_of_the_app_reads_another_objects_private_attributes() -> None:
    stale: list[str] = []
    for package in ("session", "ui"):
        for path in sorted((ROOT / "mtpwatch" / package).rglob("*.py")):
            stale += _private_reads(path)
    assert stale == [], "private attributes read across objects:\n" + "\n".join(stale)


def _setters() -> set[str]:
    """Attribute names a class declares a setter for (a property with a setter, a Textual reactive,
    any data descriptor) on Textual's widgets, the app's ui classes and `threading.Thread`: a write
    to one of these goes through the owner's own code."""
    import textual.widgets

    import mtpwatch.ui

    classes: list[type] = [threading.Thread]
    classes += [getattr(textual.widgets, name) for name in textual.widgets.__all__]  # type: ignore[attr-defined]
    for info in pkgutil.walk_packages(mtpwatch.ui.__path__, "mtpwatch.ui."):
        module = importlib.import_module(info.name)
        classes += [c for _, c in inspect.getmembers(module, inspect.isclass) if c.__module__ == info.name]
    names: set[str] = set()
    for cls in classes:
        for name in set().union(*(vars(base) for base in cls.__mro__)):
            attr = inspect.getattr_static(cls, name)
            if isinstance(attr, property) and attr.fset is None:
                continue
            if hasattr(type(attr), "__set__"):
                names.add(name)
    return names


def _foreign_writes(path: Path, setters: set[str], root: Path = ROOT) -> list[str]:
    """`x.attr = …` (also `+=`, annotated, `del`, in a tuple) where x is not self/cls, and `attr` has
    no setter its class declares: an object writing another object's attributes."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        else:
            continue
        while any(isinstance(t, (ast.Tuple, ast.List)) for t in targets):
            targets = [e for t in targets for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])]
        for target in targets:
            if not isinstance(target, ast.Attribute):
                continue
            if isinstance(target.value, ast.Name) and target.value.id in ("self", "cls"):
                continue
            if target.attr in setters:
                continue
            out.append(f"{path.relative_to(root)}:{target.lineno}: {ast.unparse(target)} = …")
    return out


def test_the_write_check_sees_a_write_to_another_objects_attribute(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    source = "def f(feed, panel):\n    feed.status = 'up'\n    panel.display = False\n    self.x = feed\n"
    module.write_text(source, encoding="utf-8")
    found = _foreign_writes(module, {"display"}, root=tmp_path)
    assert [line.split(": ", 1)[1] for line in found] == ["feed.status = …"]


def test_no_module_of_the_app_writes_another_objects_attributes() -> None:
    setters = _setters()
    stale: list[str] = []
    for package in ("session", "ui"):
        for path in sorted((ROOT / "mtpwatch" / package).rglob("*.py")):
            stale += _foreign_writes(path, setters)
    assert stale == [], "attributes written across objects:\n" + "\n".join(stale)
