"""benchmarks/profile_layers.py: a profile's self time split by layer, every second accounted for once."""

from __future__ import annotations

import cProfile
import importlib.util
import json
import math
import pstats
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SITE = "/usr/lib/python3.11/site-packages"
STDLIB = "/usr/lib/python3.11"


def _load() -> ModuleType:
    path = Path(__file__).parent.parent / "benchmarks" / "profile_layers.py"
    spec = importlib.util.spec_from_file_location("profile_layers", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("profile_layers", module)
    spec.loader.exec_module(module)
    return module


layers = _load()

OURS_RUN = ("/src/yao_actors/conversation/run.py", 10, "tool_loop")
OURS_EVENTS = ("/src/yao_actors/events.py", 20, "emit_dict")
TRIO_SCOPE = (f"{SITE}/trio/_core/_run.py", 611, "__enter__")
TRIO_LOOP = (f"{SITE}/trio/_core/_run.py", 2712, "unrolled_run")
MCP_CALL = (f"{SITE}/mcp/client/session.py", 1052, "call_tool")
CONTEXTLIB = (f"{STDLIB}/contextlib.py", 132, "__enter__")
JSON_ENCODE = (f"{STDLIB}/json/encoder.py", 183, "encode")
ISINSTANCE = ("~", 0, "<built-in method builtins.isinstance>")
SEND = ("~", 0, "<method 'send' of '_socket.socket' objects>")
POLL = ("~", 0, "<method 'poll' of 'select.epoll' objects>")


def entry(self_time: float, callers: dict[Any, Any] | None = None) -> tuple[int, int, float, float, dict]:
    """A pstats entry: its self time, and each caller with the self time spent in it from there (or a pair: self
    and cumulative time from there)."""
    pairs = {c: t if isinstance(t, tuple) else (t, t) for c, t in (callers or {}).items()}
    return (1, 1, self_time, self_time, {c: (1, 1, tt, ct) for c, (tt, ct) in pairs.items()})


STATS = {
    OURS_RUN: entry(1.0),
    OURS_EVENTS: entry(0.5, {OURS_RUN: 0.5}),
    TRIO_LOOP: entry(2.0),
    # self time from each caller, and cumulative with what runs below it (contextlib, a socket send), 3:1 as well
    TRIO_SCOPE: entry(0.8, {OURS_RUN: (0.6, 0.6 + 0.4875), MCP_CALL: (0.2, 0.2 + 0.1625)}),
    MCP_CALL: entry(1.5),
    # contextlib works for Trio's scope, which works for its callers: it climbs two levels.
    CONTEXTLIB: entry(0.4, {TRIO_SCOPE: 0.4}),
    JSON_ENCODE: entry(0.3, {OURS_EVENTS: 0.3}),
    # a built-in called from two layers: split by what each spent in it
    ISINSTANCE: entry(0.9, {OURS_EVENTS: 0.6, MCP_CALL: 0.3}),
    SEND: entry(0.25, {TRIO_SCOPE: 0.25}),
    POLL: entry(5.0, {TRIO_LOOP: 5.0}),
}
WORKING = sum(value[2] for key, value in STATS.items() if key != POLL)


def test_layers_count_builtins_and_stdlib_for_their_callers() -> None:
    totals = layers.LayerSplit(STATS).totals()
    assert totals["ours: conversation"] == pytest.approx(1.0)
    assert totals["ours: dispatch, actors, events"] == pytest.approx(0.5 + 0.6)  # emit_dict and its isinstance
    assert totals["MCP SDK"] == pytest.approx(1.5 + 0.3)
    assert totals["Trio"] == pytest.approx(2.0 + 0.8 + 0.4)  # the loop, the scope, contextlib under the scope
    assert totals["JSON (stdlib)"] == pytest.approx(0.3)
    assert totals[layers.SOCKETS] == pytest.approx(0.25)
    assert totals[layers.POLL] == pytest.approx(5.0)
    assert sum(v for k, v in totals.items() if k != layers.POLL) == pytest.approx(WORKING)


def test_trio_by_caller_gives_trio_time_to_who_called_into_it() -> None:
    totals = layers.LayerSplit(STATS, trio_by_caller=True).totals()
    # The scope's 0.8 and contextlib's 0.4 under it go 3:1 to the run and the SDK, as the scope's callers spent.
    assert totals["ours: conversation"] == pytest.approx(1.0 + 0.6 + 0.3)
    assert totals["MCP SDK"] == pytest.approx(1.5 + 0.3 + 0.2 + 0.1)
    assert totals[layers.SCHEDULER] == pytest.approx(2.0)
    assert totals.get("Trio", 0.0) == 0.0
    assert sum(v for k, v in totals.items() if k != layers.POLL) == pytest.approx(WORKING)


def test_by_module_names_each_of_the_runtimes_modules() -> None:
    totals = layers.LayerSplit(STATS, by_module=True).totals()
    assert totals["ours: conversation/run.py"] == pytest.approx(1.0)
    assert totals["ours: events.py"] == pytest.approx(0.5 + 0.6)


WRAP = (f"{STDLIB}/functools.py", 30, "wrap")
SORTED = ("~", 0, "<built-in method builtins.sorted>")
DEEPCOPY = (f"{STDLIB}/copy.py", 128, "deepcopy")


def test_time_from_below_climbs_by_what_each_caller_spent_below() -> None:
    """A stdlib ``wrap`` does its own cheap work for the SDK, and a long ``sorted`` only for the runtime: the
    ``sorted`` time goes to the runtime (the time each caller spent *below* ``wrap``), wrap's own to each by self."""
    stats = {
        OURS_RUN: entry(0.1),
        MCP_CALL: entry(0.1),
        WRAP: entry(0.21, {OURS_RUN: (0.01, 0.71), MCP_CALL: (0.2, 0.2)}),
        SORTED: entry(0.7, {WRAP: 0.7}),
    }
    totals = layers.LayerSplit(stats).totals()
    assert totals["ours: conversation"] == pytest.approx(0.1 + 0.01 + 0.7)
    assert totals["MCP SDK"] == pytest.approx(0.1 + 0.2)


def test_recursion_climbs_past_itself() -> None:
    """``deepcopy`` calling itself: its time goes to the runtime that called it, not back to itself."""
    stats = {
        OURS_RUN: entry(0.1),
        DEEPCOPY: entry(1.0, {OURS_RUN: (0.2, 1.5), DEEPCOPY: (0.8, 1.3)}),
        ISINSTANCE: entry(0.5, {DEEPCOPY: 0.5}),
    }
    totals = layers.LayerSplit(stats).totals()
    assert totals["ours: conversation"] == pytest.approx(1.6)
    assert totals.get(layers.STDLIB, 0.0) == 0.0


def test_the_scheduler_loop_is_named_by_file_and_function() -> None:
    """Trio's run loop is the scheduler's; another Trio function named ``run`` (a thread's) is not."""
    thread_run = (f"{SITE}/trio/_threads.py", 170, "run")
    stats = {TRIO_LOOP: entry(1.0), thread_run: entry(0.5, {OURS_RUN: 0.5}), OURS_RUN: entry(0.1)}
    totals = layers.LayerSplit(stats, trio_by_caller=True).totals()
    assert totals[layers.SCHEDULER] == pytest.approx(1.0)
    assert totals["ours: conversation"] == pytest.approx(0.6)


def test_a_real_profile_is_split_without_losing_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A real cProfile dump: the split adds up to the profile's own total, and the script prints it per run."""
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(200):
        json.dumps({"a": [1, 2, 3], "b": "x" * 50})
        math.fsum(range(100))
    profiler.disable()
    out = tmp_path / "p.prof"
    profiler.dump_stats(out)
    stats = pstats.Stats(str(out)).stats  # type: ignore[attr-defined]
    totals = layers.LayerSplit(stats).totals()
    assert sum(totals.values()) == pytest.approx(sum(value[2] for value in stats.values()))
    assert totals["JSON (stdlib)"] > 0
    layers.main([str(out), "--runs", "200"])
    printed = capsys.readouterr().out
    assert "ms/run" in printed
    assert "JSON (stdlib)" in printed
