"""``yao-actors bench``: time N calls of your own tools in parallel against one after another.

``bench --call SERVER__TOOL [--args JSON] [--config FILE] [--calls N] [--repeat R] [--modes raw,parallel,sequential]
[--sweep 1,2,4,...] [--plot out.png] [--json out.json] [--dry-run]`` starts the config's servers the calls name,
warms up, then times batches of N calls in each mode, interleaved, R times, and prints a table (median, p95, × one
call, speedup, efficiency, vs raw, failed calls). It really calls the tools: ``--dry-run`` prints the plan and how
many calls each tool would get, and starts nothing. A progress line goes to stderr while it runs. Its options are
:mod:`.bench_options` (read without importing this module).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

import trio

from yao_actors.bench.plan import (
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
