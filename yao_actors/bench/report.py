"""What a benchmark run measured, as figures: rows of statistics, the table printed, the JSON written.

Per batch size and mode a row has the median and p95 wall time of a batch, the
median in units of one call alone (the slowest tool's baseline median), the
speedup over ``sequential``, the efficiency (one call / median: 1.0 is a batch
as fast as a single call) and the ratio to ``raw``, and the failed calls by
kind. A figure whose reference mode was not run is ``None`` (a ``-`` in the table).
"""

from __future__ import annotations

import math
import os
import platform
import statistics
import time
from collections.abc import Mapping, Sequence
from typing import Any

import trio

from yao_actors.bench.plan import BenchPlan
from yao_actors.bench.runner import BenchResults
from yao_actors.specs import DEFAULT_RESULT_BUDGET
from yao_actors.tools.budget import format_size


def p95(values: Sequence[float]) -> float:
    """The 95th percentile by the nearest-rank method (the largest value for fewer than 20)."""
    if not values:
        raise ValueError("p95 of no values")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


def _ratio(numerator: float | None, denominator: float | None, digits: int) -> float | None:
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, digits)


def one_call_seconds(results: BenchResults) -> float | None:
    """The baseline: the largest of the tools' median single-call times (``None`` without a baseline)."""
    medians = [statistics.median(values) for values in results.baseline.values() if values]
    return max(medians) if medians else None


def summarise(plan: BenchPlan, results: BenchResults) -> list[dict[str, Any]]:
    """One row per batch size and mode, in the plan's order."""
    one_call = one_call_seconds(results)
    rows = []
    for size in plan.sizes:
        medians = {mode: statistics.median(results.samples[(size, mode)]) for mode in plan.modes}
        for mode in plan.modes:
            values = results.samples[(size, mode)]
            median = medians[mode]
            failures = results.failures[(size, mode)]
            rows.append(
                {
                    "calls": size,
                    "mode": mode,
                    "samples_ms": [round(v * 1000, 3) for v in values],
                    "median_ms": round(median * 1000, 3),
                    "p95_ms": round(p95(values) * 1000, 3),
                    "x_one_call": _ratio(median, one_call, 3),
                    "speedup_vs_sequential": _ratio(medians.get("sequential"), median, 2),
                    "efficiency": _ratio(one_call, median, 3),
                    "vs_raw": _ratio(median, medians.get("raw"), 3),
                    "calls_timed": size * len(values),
                    "failed": sum(failures.values()),
                    "failures": dict(sorted(failures.items())),
                    "retried_alone": results.retried.get((size, mode), 0),
                }
            )
    return rows


def _cell(value: float | None, spec: str, suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The table ``yao-actors bench`` prints, with the failures by kind under it."""
    header = (
        f"{'N':>4} {'mode':<10} {'median ms':>10} {'p95 ms':>9} {'x 1 call':>8} "
        f"{'speedup':>8} {'effic.':>7} {'vs raw':>7} {'failed':>9}"
    )
    lines = [header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r['calls']:>4} {r['mode']:<10} {r['median_ms']:>10.1f} {r['p95_ms']:>9.1f} "
            f"{_cell(r['x_one_call'], '>8.2f')} {_cell(r['speedup_vs_sequential'], '>7.2f', 'x')} "
            f"{_cell(r['efficiency'], '>7.2f')} {_cell(r['vs_raw'], '>7.3f')} "
            f"{r['failed']:>4}/{r['calls_timed']:<4}"
        )
    failed = [r for r in rows if r["failed"] or r["retried_alone"]]
    if failed:
        lines.append("")
        lines.append("failed calls by kind (timed batches):")
        for r in failed:
            kinds = ", ".join(f"{kind} {count}" for kind, count in r["failures"].items()) or "none"
            retried = f"; {r['retried_alone']} run again alone after a retryable failure" if r["retried_alone"] else ""
            lines.append(f"  N={r['calls']} {r['mode']}: {kinds}{retried}")
    return "\n".join(lines)


def format_result_sizes(result_chars: Mapping[str, int], per_result: int = DEFAULT_RESULT_BUDGET.per_result) -> str:
    """The lines under the table: each tool's largest result as a model gets it, the ones past ``per_result``
    (which a model sees cut) marked, so the tools that flood a model's context stand out."""
    if not result_chars:
        return ""
    lines = [f"result sizes (characters of the tool message a model gets; over {per_result:,} it is cut):"]
    for name, chars in sorted(result_chars.items(), key=lambda item: -item[1]):
        flag = (
            f"  over the budget: {format_size(chars)}, the model sees {format_size(per_result)}"
            if chars > per_result
            else ""
        )
        lines.append(f"  {name:<40} {chars:>12,}{flag}")
    return "\n".join(lines)


def build_report(
    plan: BenchPlan, results: BenchResults, *, source: str, calls: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The JSON document of a run: what was asked, the machine, the baseline, the rows."""
    one_call = one_call_seconds(results)
    warmup = {
        f"N={size} {mode}": dict(failures) for (size, mode), failures in results.warmup_failures.items() if failures
    }
    return {
        "benchmark": "yao-actors bench",
        "config": source,
        "calls": list(calls),
        "plan": {
            "sizes": list(plan.sizes),
            "modes": list(plan.modes),
            "repeat": plan.repeat,
            "warmup": plan.warmup,
            "calls_per_tool": plan.calls_per_tool(),
        },
        "baseline": {
            "mode": results.baseline_mode,
            "one_call_ms": None if one_call is None else round(one_call * 1000, 3),
            "by_tool_ms": {
                name: round(statistics.median(values) * 1000, 3) for name, values in results.baseline.items() if values
            },
            "failures": dict(results.baseline_failures),
        },
        "warmup_failures": warmup,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "trio": trio.__version__,
        },
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rows": summarise(plan, results),
        "result_chars": dict(results.result_chars),
    }
