"""Benchmark: a batch of tool calls dispatched in parallel against one after another, over real MCP transports.

A thin user of ``yao_actors.bench`` (what ``yao-actors bench`` runs against your
own servers), pointed at the package's test server. N calls (``--calls``,
default 16) are spread round-robin over S servers (``--servers``, default 4);
each call runs the test server's ``sleep`` tool for L ms (``--latency-ms``,
default 100). Per transport (in-memory, stdio, streamable HTTP on loopback) four
ways are timed, interleaved repetition by repetition so machine noise hits them
alike:

- ``raw``: the same batch sent with a plain ``mcp`` client per server over the
  same transport, every call started at once from a plain nursery — the floor
  on this machine (each call still costs CPU in the client and the server);
- ``actor``: the same plain nursery calling the server actors' handles, which
  separates the actors' cost from dispatch's own;
- ``parallel``: ``execute_tool_calls`` through the server actors (validation,
  grouping, events, deadlines included);
- ``sequential``: ``execute_tool_calls(mode="sequential")``, every call after the
  previous one (about N × L).

The table shows median and p95 wall time, the median in units of one call alone
(measured: about L), the speedup over sequential, efficiency (one call /
median) and the ratio to raw, and failed calls. Figures go to
``benchmarks/results/dispatch.json``. ``--plot`` also sweeps N and draws wall
time against N into one PNG per transport (needs matplotlib:
``pip install 'yao-actors[plot]'``). This measures; it asserts no time.

Run from anywhere: ``python benchmarks/dispatch.py``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import trio

from yao_actors.bench import MODES, BenchCall, BenchPlan, build_report, format_table, open_bench, run_bench
from yao_actors.bench.plan import parse_sizes
from yao_actors.bench.plot import require_matplotlib, write_plot
from yao_actors.config import Config, HttpTransport, InMemoryTransport, ServerSpec
from yao_actors.errors import BenchError
from yao_actors.testing import open_http_test_server, stdio_test_server
from yao_actors.testing.servers import build_test_server

TRANSPORTS = ("memory", "stdio", "http")
RESULTS = Path(__file__).resolve().parent / "results" / "dispatch.json"


@asynccontextmanager
async def open_config(transport: str, servers: int) -> AsyncIterator[Config]:
    """S test servers ``s0..`` on ``transport`` (HTTP ones are started here and stopped on exit)."""
    ids = [f"s{i}" for i in range(servers)]
    async with AsyncExitStack() as stack:
        if transport == "http":
            launched = [await stack.enter_async_context(open_http_test_server(i)) for i in ids]
            specs = [ServerSpec(i, HttpTransport(await s.url())) for i, s in zip(ids, launched, strict=True)]
        elif transport == "stdio":
            specs = [stdio_test_server(i) for i in ids]
        else:
            specs = [ServerSpec(i, InMemoryTransport(build_test_server(i))) for i in ids]
        yield Config(servers={spec.id: spec for spec in specs})


def progress(transport: str) -> Any:
    def say(text: str) -> None:
        print(f"\r[{transport}] {text}".ljust(60), end="", file=sys.stderr, flush=True)

    return say


async def run_benchmark(plan: BenchPlan, servers: int, transports: Sequence[str]) -> dict[str, Any]:
    reports: dict[str, Any] = {}
    for transport in transports:
        async with open_config(transport, servers) as config, open_bench(config, plan) as bench:
            results = await run_bench(bench, progress=progress(transport))
            print(file=sys.stderr)
        calls = [{"name": c.name, "arguments": dict(c.arguments)} for c in plan.calls]
        reports[transport] = build_report(plan, results, source=f"{servers} test servers over {transport}", calls=calls)
    return reports


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=16, help="N, calls in the batch")
    parser.add_argument("--servers", type=int, default=4, help="S, servers the calls are spread over")
    parser.add_argument("--latency-ms", type=float, default=100.0, help="L, how long each tool sleeps")
    parser.add_argument("--repeat", type=int, default=7, help="interleaved repetitions per mode")
    parser.add_argument("--transports", default=",".join(TRANSPORTS), help="comma-separated: memory,stdio,http")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the JSON figures go")
    parser.add_argument("--plot", type=Path, nargs="?", const=RESULTS.with_suffix(".png"), default=None)
    parser.add_argument("--sweep", default="1,2,4,8,16,32", help="values of N for --plot")
    args = parser.parse_args(argv)
    transports = [t for t in args.transports.split(",") if t]
    unknown = set(transports) - set(TRANSPORTS)
    if unknown:
        parser.error(f"unknown transports: {', '.join(sorted(unknown))}")
    try:
        if args.plot is not None:
            require_matplotlib()
        arguments = {"seconds": args.latency_ms / 1000}
        plan = BenchPlan(
            tuple(BenchCall(f"s{i}__sleep", arguments) for i in range(args.servers)),
            sizes=parse_sizes(args.calls, args.sweep if args.plot is not None else None),
            modes=MODES,
            repeat=args.repeat,
        )
    except BenchError as error:
        parser.error(str(error))
    # Before any in-process MCPServer configures the root logger at INFO (every HTTP request would be printed).
    logging.basicConfig(level=logging.WARNING)
    reports = trio.run(run_benchmark, plan, args.servers, transports)
    for transport, report in reports.items():
        print(f"\n{transport}: {args.servers} servers, L = {args.latency_ms:g} ms")
        print(format_table(report["rows"]))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "benchmark": "dispatch",
        "servers": args.servers,
        "latency_ms": args.latency_ms,
        "by_transport": reports,
    }
    args.out.write_text(json.dumps(document, indent=2) + "\n")
    print(f"figures written to {args.out}")
    if args.plot is not None:
        for transport, report in reports.items():
            path = args.plot.with_name(f"{args.plot.stem}-{transport}{args.plot.suffix}")
            write_plot(report, path)
            print(f"plot written to {path}")


if __name__ == "__main__":
    main()
