"""The options of ``yao-actors bench`` (the command itself is :mod:`.bench`): only what building the parser needs, so the
other commands do not import the benchmark's runner.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from yao_actors.bench.plan import DEFAULT_MODES, MODES
from yao_actors.cli.client_files import CONFIG_HELP, config_file

#: The defaults of ``--calls`` and ``--repeat``.
DEFAULT_CALLS = 8
DEFAULT_REPEAT = 5


def add_bench_parser(commands: Any, command: Callable[[argparse.Namespace], int]) -> None:
    """Add the ``bench`` subcommand to the ``yao-actors`` parser's subparsers; ``command`` runs it
    (:func:`yao_actors.cli.bench.bench_command`)."""
    bench = commands.add_parser(
        "bench",
        help="time N calls of your tools: parallel against sequential dispatch (calls them for real)",
        description=(
            "Time batches of N calls of your own tools in each mode (raw, parallel, sequential, ...), interleaved, "
            "R times, and print median, p95, x one call, speedup, efficiency, vs raw and failed calls. "
            "It really calls the tools: --dry-run prints how many times each would be called, and starts nothing."
        ),
    )
    bench.add_argument("--config", metavar="FILE", type=config_file, help=CONFIG_HELP)
    bench.add_argument(
        "--call",
        action="append",
        required=True,
        metavar="SERVER__TOOL",
        help="the tool to call (flat name, as a model sees it); several spread the batch over them round-robin",
    )
    bench.add_argument(
        "--args",
        action="append",
        default=[],
        metavar="JSON",
        help="the arguments, a JSON object: once for every --call, or once per --call in order (default: {})",
    )
    bench.add_argument(
        "--calls", type=int, default=DEFAULT_CALLS, metavar="N", help=f"N, calls per batch (default {DEFAULT_CALLS})"
    )
    bench.add_argument(
        "--repeat",
        type=int,
        default=DEFAULT_REPEAT,
        metavar="R",
        help=f"R, timed batches per mode (default {DEFAULT_REPEAT})",
    )
    bench.add_argument(
        "--warmup", type=int, default=1, metavar="W", help="untimed batches per mode and N first (default 1)"
    )
    bench.add_argument(
        "--modes",
        default=",".join(DEFAULT_MODES),
        help=f"comma-separated, from {','.join(MODES)} (default {','.join(DEFAULT_MODES)})",
    )
    bench.add_argument("--sweep", help="several N, comma-separated (1,2,4,8): a row per N and mode")
    bench.add_argument("--plot", type=Path, help="write median time against N to this PNG (needs the [plot] extra)")
    bench.add_argument("--json", type=Path, help="write every figure to this JSON file")
    bench.add_argument("--dry-run", action="store_true", help="print the plan and the calls it would make; run nothing")
    bench.set_defaults(command=command)
