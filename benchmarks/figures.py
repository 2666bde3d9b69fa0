"""What the benchmarks share in showing their figures: a table of medians with their samples, the machine and its
load beside the figures, and how the results file is written."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def load_average() -> list[float]:
    """The 1, 5 and 15-minute load averages now, rounded: taken at a benchmark's start, and again at its end."""
    return [round(x, 2) for x in os.getloadavg()]


def machine(load_at_start: Sequence[float], **more: Any) -> dict[str, Any]:
    """The machine the figures were taken on: Python, CPUs, platform, the load at the start and now, and ``more``."""
    return {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        **more,
        "load_average_at_start": list(load_at_start),
        "load_average_at_end": load_average(),
    }


def write(out: Path, report: dict[str, Any]) -> None:
    """Write ``report`` to ``out`` as JSON (its folder made if need be), and say where."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"figures written to {out}")


def print_medians(kind: str, figure: str, rows: Mapping[str, tuple[float, Sequence[float] | None]]) -> None:
    """A table of medians, a row a name: the ``figure``'s median and the samples it is the median of (none for a
    figure derived from others)."""
    width = max(len(kind), *map(len, rows))
    print(f"{kind:<{width}} {figure:>10}   samples")
    for name, (median, samples) in rows.items():
        print(f"{name:<{width}} {median:>10.2f}   {[round(x, 2) for x in samples] if samples else ''}".rstrip())
