"""``yao-actors bench``: parallel against sequential dispatch of your own servers' tools, from the installed package.

:class:`BenchPlan` says what runs (:mod:`.plan`); :func:`open_bench` starts the
servers and :func:`run_bench` times the modes (:mod:`.runner`); :mod:`.report`
turns the samples into rows, a table and a JSON document; :mod:`.plot` draws
them (the ``[plot]`` extra); :mod:`.cli` is the subcommand.
"""

from yao_actors.bench.plan import DEFAULT_MODES, MODES, BenchCall, BenchPlan
from yao_actors.bench.report import build_report, format_table, p95, summarise
from yao_actors.bench.runner import Bench, BenchResults, open_bench, run_bench

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
