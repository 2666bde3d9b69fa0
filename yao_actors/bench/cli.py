"""``yao-actors bench``: time N calls of your own tools in parallel against one after another.

``bench --call SERVER__TOOL [--args JSON] [--config FILE] [--calls N] [--repeat R] [--modes raw,parallel,sequential]
[--sweep 1,2,4,...] [--plot out.png] [--json out.json] [--dry-run]`` starts the config's servers the calls name,
warms up, then times batches of N calls in each mode, interleaved, R times, and prints a table (median, p95, × one
call, speedup, efficiency, vs raw, failed calls). It really calls the tools: ``--dry-run`` prints the plan and how
many calls each tool would get, and starts nothing. A progress line goes to stderr while it runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

import trio

from yao_actors.bench.plan import (
    DEFAULT_MODES,
    MODES,
    BenchCall,
    BenchPlan,
    parse_arguments,
    parse_modes,
    parse_sizes,
    servers_named,
)
from yao_actors.bench.plot import require_matplotlib, write_plot
from yao_actors.bench.report import build_report, format_result_sizes, format_table
from yao_actors.bench.runner import open_bench, run_bench
from yao_actors.config import Config, default_config, load_config
from yao_actors.errors import BenchError, ConfigError

#: The defaults of ``--calls`` and ``--repeat``.
DEFAULT_CALLS = 8
DEFAULT_REPEAT = 5


def add_bench_parser(commands: Any) -> None:
    """Add the ``bench`` subcommand to the ``yao-actors`` parser's subparsers."""
    bench = commands.add_parser(
        "bench",
        help="time N calls of your tools: parallel against sequential dispatch (calls them for real)",
        description=(
            "Time batches of N calls of your own tools in each mode (raw, parallel, sequential, ...), interleaved, "
            "R times, and print median, p95, x one call, speedup, efficiency, vs raw and failed calls. "
            "It really calls the tools: --dry-run prints how many times each would be called, and starts nothing."
        ),
    )
    bench.add_argument("--config", metavar="FILE", help="configuration file (default: the embedded demo)")
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
    bench.set_defaults(command=bench_command)


def bench_command(args: argparse.Namespace) -> int:
    """Run ``yao-actors bench``; 2 for a bad option or configuration (before any tool is called)."""
    try:
        plan = BenchPlan(
            calls=tuple(
                BenchCall(name, arguments)
                for name, arguments in zip(args.call, parse_arguments(args.args, len(args.call)), strict=True)
            ),
            sizes=parse_sizes(args.calls, args.sweep, for_plot=args.plot is not None),
            modes=parse_modes(args.modes),
            repeat=args.repeat,
            warmup=args.warmup,
        )
        source = args.config or "(embedded default)"
        config = load_config(args.config) if args.config else default_config()
        servers = servers_named(plan, config.servers)
        if args.plot is not None:
            require_matplotlib()
        if args.dry_run:
            print(plan.describe(source, servers))
            return 0
        report = trio.run(_run, config, plan, source, _ProgressLine(sys.stderr))
    except (BenchError, ConfigError) as error:
        print(f"yao-actors bench: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    print(format_table(report["rows"]))
    if sizes := format_result_sizes(report["result_chars"]):
        print("\n" + sizes)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"figures written to {args.json}")
    if args.plot is not None:
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        write_plot(report, args.plot)
        print(f"plot written to {args.plot}")
    return 0


async def _run(config: Config, plan: BenchPlan, source: str, progress: _ProgressLine) -> dict[str, Any]:
    async with open_bench(config, plan) as bench:
        total = sum(plan.calls_per_tool().values())
        print(f"yao-actors bench: {total} real tool calls, on {', '.join(bench.handles)}", file=sys.stderr, flush=True)
        try:
            results = await run_bench(bench, progress=progress)
        finally:
            progress.done()
        calls = [
            {"name": t.entry.name, "server": t.entry.server, "tool": t.entry.tool, "arguments": dict(t.arguments)}
            for t in bench.targets
        ]
    return build_report(plan, results, source=source, calls=calls)


class _ProgressLine:
    """What runs now, on one line rewritten in place on a terminal, or one line per step when piped."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.width = 0

    def __call__(self, text: str) -> None:
        line = f"bench: {text}"
        if self.tty:
            self.stream.write("\r" + line.ljust(self.width))
            self.width = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self.tty and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
