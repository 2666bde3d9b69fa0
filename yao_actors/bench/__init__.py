"""``yao-actors bench``: parallel against sequential dispatch of your own servers' tools, from the installed package.

:class:`BenchPlan` says what runs (:mod:`.plan`); :func:`open_bench` starts the
servers and :func:`run_bench` times the modes (:mod:`.runner`); :mod:`.report`
turns the samples into rows, a table and a JSON document; :mod:`.plot` draws
them (the ``[plot]`` extra); the subcommand and its options are the command line's
(:mod:`yao_actors.cli.bench`, :mod:`yao_actors.cli.bench_options`). The names below are imported when first used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from yao_actors.bench.plan import DEFAULT_MODES, MODES, BenchCall, BenchPlan
    from yao_actors.bench.report import build_report, format_table, p95, summarise
    from yao_actors.bench.runner import Bench, BenchResults, open_bench, run_bench

_WHERE = {
    "DEFAULT_MODES": "plan", "MODES": "plan", "BenchCall": "plan", "BenchPlan": "plan",
    "build_report": "report", "format_table": "report", "p95": "report", "summarise": "report",
    "Bench": "runner", "BenchResults": "runner", "open_bench": "runner", "run_bench": "runner",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"yao_actors.bench.{_WHERE[name]}"), name)


__all__ = [
    "DEFAULT_MODES",
    "MODES",
    "Bench",
    "BenchCall",
    "BenchPlan",
    "BenchResults",
    "build_report",
    "format_table",
    "open_bench",
    "p95",
    "run_bench",
    "summarise",
]
