"""The PNG of ``yao-actors bench --plot``: median batch time against N, one line per mode.

matplotlib is an optional extra (``pip install 'yao-actors[plot]'``); without it
:func:`require_matplotlib` raises :class:`BenchError` saying so, which the
command checks before it starts any server.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from yao_actors.errors import BenchError

INSTALL_HINT = "pip install 'yao-actors[plot]'"


def require_matplotlib() -> None:
    """Raise :class:`BenchError` when matplotlib cannot be imported (not installed, or broken)."""
    try:
        importlib.import_module("matplotlib")
    except ImportError as error:
        raise BenchError([f"--plot: matplotlib cannot be imported ({error}); install it: {INSTALL_HINT}"]) from None


def write_plot(report: Mapping[str, Any], path: str | Path) -> None:
    """Draw the report's rows (median ms against N, per mode) into the PNG at ``path``."""
    require_matplotlib()
    # Imported by name: matplotlib is optional and untyped here.
    importlib.import_module("matplotlib").use("Agg")
    plt = importlib.import_module("matplotlib.pyplot")
    rows = report["rows"]
    modes = list(dict.fromkeys(row["mode"] for row in rows))
    figure, ax = plt.subplots(figsize=(6, 4))
    try:
        for mode in modes:
            points = [row for row in rows if row["mode"] == mode]
            ax.plot([p["calls"] for p in points], [p["median_ms"] for p in points], marker="o", label=mode)
        names = ", ".join(call["name"] for call in report["calls"])
        one_call = report["baseline"]["one_call_ms"]
        baseline = f"; one call alone {one_call:.1f} ms" if one_call is not None else ""
        ax.set_title(f"{names}{baseline}", fontsize=9)
        ax.set_xlabel("calls in the batch (N)")
        ax.set_ylabel("median wall time of a batch (ms)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        sizes = sorted({row["calls"] for row in rows})
        ax.set_xticks(sizes, labels=[str(size) for size in sizes])
        ax.legend()
        figure.tight_layout()
        figure.savefig(Path(path), dpi=120)
    finally:
        plt.close(figure)
