"""Benchmark: a batch of tool calls dispatched in parallel against one after another, over real MCP transports.

N calls (``--calls``, default 16) are spread round-robin over S servers
(``--servers``, default 4); each call runs the test server's ``sleep`` tool for L
ms (``--latency-ms``, default 100). Per transport (in-memory, stdio, streamable
HTTP on loopback) four ways are timed, interleaved repetition by repetition so
machine noise hits them alike:

- ``raw``: the same batch sent with the plain ``mcp`` client, one client per
  server, every call started at once from a plain nursery — the floor on this
  machine (each call still costs CPU in the client and the server);
- ``actor``: the same plain nursery calling the server actors' handles, which
  separates the actors' cost from dispatch's own;
- ``parallel``: ``execute_tool_calls`` through the server actors (validation,
  grouping, events, deadlines included);
- ``sequential``: ``execute_tool_calls(mode="sequential")``, every call after the
  previous one (about N × L).

The table shows median and p95 wall time, the median in units of the slowest
call (L), the speedup of parallel over sequential, efficiency (L / parallel
median) and parallel against raw. Figures go to ``benchmarks/results/dispatch.json``.
``--plot`` also sweeps N and draws wall time against N into a PNG (needs
matplotlib: ``pip install 'yao-actors[plot]'``). This measures; it asserts no time.

Run from the repository root: ``python benchmarks/dispatch.py``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import logging
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import mcp
import trio
from mcp.client.stdio import StdioServerParameters

from yao_actors.catalog import Catalog, build_catalog
from yao_actors.config import (
    Config,
    HttpTransport,
    InMemoryTransport,
    ServerRef,
    ServerSpec,
    StdioTransport,
)
from yao_actors.dispatch import ToolServer, execute_tool_calls
from yao_actors.models.base import ToolCall
from yao_actors.runtime import open_runtime
from yao_actors.testing import TEST_SERVER_COMMAND, open_http_test_server
from yao_actors.testing.servers import build_test_server

TRANSPORTS = ("memory", "stdio", "http")
MODES = ("raw", "actor", "parallel", "sequential")
ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "dispatch.json"

Batch = Callable[[int], Awaitable[None]]
"""Runs a batch of N calls once."""


@attrs.frozen
class Params:
    calls: int
    servers: int
    latency: float
    repeat: int


@attrs.define(eq=False)
class Setup:
    """One transport, ready: S server actors (with their catalog) and S plain ``mcp`` clients."""

    servers: dict[str, ToolServer]
    catalog: Catalog
    raw_clients: list[mcp.Client]


def server_ids(count: int) -> list[str]:
    return [f"s{i}" for i in range(count)]


def batch_calls(count: int, servers: int, latency: float) -> list[ToolCall]:
    """N calls of ``sleep(latency)``, server ``i % S`` for call ``i``."""
    arguments = json.dumps({"seconds": latency})
    return [ToolCall(f"call-{i}", f"s{i % servers}__sleep", arguments) for i in range(count)]


@asynccontextmanager
async def open_setup(transport: str, params: Params) -> AsyncIterator[Setup]:
    """Start S servers on ``transport`` (actors through the runtime, plus raw clients)."""
    ids = server_ids(params.servers)
    async with AsyncExitStack() as stack:
        if transport == "http":
            launched = [await stack.enter_async_context(open_http_test_server(i)) for i in ids]
            urls = [await server.url() for server in launched]
            specs = [ServerSpec(i, HttpTransport(url)) for i, url in zip(ids, urls, strict=True)]
            raw_targets: list[Any] = list(urls)
        elif transport == "stdio":
            command, *args = TEST_SERVER_COMMAND
            specs = [ServerSpec(i, StdioTransport(command, (*args, "--name", i))) for i in ids]
            raw_targets = [StdioServerParameters(command=command, args=[*args, "--name", i]) for i in ids]
        else:
            specs = [ServerSpec(i, InMemoryTransport(build_test_server(i))) for i in ids]
            raw_targets = [build_test_server(i) for i in ids]
        runtime = await stack.enter_async_context(open_runtime(Config(servers={s.id: s for s in specs})))
        servers: dict[str, ToolServer] = dict(runtime.servers)
        catalog = await build_catalog([ServerRef(i) for i in ids], servers, max_tools=1000)
        raw_clients = [
            await stack.enter_async_context(mcp.Client(target, mode="legacy", cache=None)) for target in raw_targets
        ]
        for client in raw_clients:
            await client.list_tools()  # as warm as the actors: output schemas known, no tools/list per call
        yield Setup(servers, catalog, raw_clients)


def batches(setup: Setup, params: Params) -> dict[str, Batch]:
    """The ways to run a batch of N calls on ``setup``, by mode."""

    async def raw(count: int) -> None:
        async def one(i: int) -> None:
            result = await setup.raw_clients[i % params.servers].call_tool("sleep", {"seconds": params.latency})
            if result.is_error:
                raise RuntimeError(f"raw call {i} failed: {result.content}")

        async with trio.open_nursery() as nursery:
            for i in range(count):
                nursery.start_soon(one, i)

    async def actor(count: int) -> None:
        async def one(i: int) -> None:
            outcome = await setup.servers[f"s{i % params.servers}"].call_tool("sleep", {"seconds": params.latency})
            if not outcome.ok:
                raise RuntimeError(f"actor call {i} failed: {outcome.error}")

        async with trio.open_nursery() as nursery:
            for i in range(count):
                nursery.start_soon(one, i)

    def dispatched(mode: Any) -> Batch:
        async def run(count: int) -> None:
            calls = batch_calls(count, params.servers, params.latency)
            results = await execute_tool_calls(calls, setup.catalog, setup.servers, mode=mode)
            failed = [r for r in results if not r.ok]
            if failed:
                raise RuntimeError(f"{len(failed)} calls failed, first: {failed[0].error}")

        return run

    return {"raw": raw, "actor": actor, "parallel": dispatched("parallel"), "sequential": dispatched("sequential")}


async def measure(runs: dict[str, Batch], count: int, repeat: int) -> dict[str, list[float]]:
    """Wall seconds per mode: one warm-up each, then ``repeat`` interleaved rounds."""
    samples: dict[str, list[float]] = {mode: [] for mode in runs}
    for mode in runs:
        await runs[mode](count)
    for _ in range(repeat):
        for mode, run in runs.items():
            start = time.perf_counter()
            await run(count)
            samples[mode].append(time.perf_counter() - start)
    return samples


def p95(values: Sequence[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


def summarise(transport: str, samples: dict[str, list[float]], params: Params) -> list[dict[str, Any]]:
    medians = {mode: statistics.median(values) for mode, values in samples.items()}
    rows = []
    for mode, values in samples.items():
        rows.append(
            {
                "transport": transport,
                "mode": mode,
                "calls": params.calls,
                "servers": params.servers,
                "latency_ms": params.latency * 1000,
                "samples_ms": [round(v * 1000, 2) for v in values],
                "median_ms": round(medians[mode] * 1000, 2),
                "p95_ms": round(p95(values) * 1000, 2),
                "x_slowest_call": round(medians[mode] / params.latency, 3),
                "speedup_vs_sequential": round(medians["sequential"] / medians[mode], 2),
                "efficiency": round(params.latency / medians[mode], 3),
                "vs_raw": round(medians[mode] / medians["raw"], 3),
            }
        )
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    header = (
        f"{'transport':<9} {'mode':<10} {'median ms':>10} {'p95 ms':>9} {'x L':>6} "
        f"{'speedup':>8} {'effic.':>7} {'vs raw':>7}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        print(
            f"{r['transport']:<9} {r['mode']:<10} {r['median_ms']:>10.1f} {r['p95_ms']:>9.1f} "
            f"{r['x_slowest_call']:>6.2f} {r['speedup_vs_sequential']:>7.2f}x {r['efficiency']:>7.2f} "
            f"{r['vs_raw']:>7.3f}"
        )


async def run_benchmark(params: Params, transports: Sequence[str], sweep: Sequence[int]) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    swept: list[dict[str, Any]] = []
    for transport in transports:
        print(f"[{transport}] starting {params.servers} servers ...", file=sys.stderr, flush=True)
        async with open_setup(transport, params) as setup:
            runs = batches(setup, params)
            samples = await measure(runs, params.calls, params.repeat)
            rows.extend(summarise(transport, samples, params))
            for count in sweep:
                print(f"[{transport}] sweep N={count}", file=sys.stderr, flush=True)
                by_mode = await measure(runs, count, max(3, params.repeat // 2))
                for mode, values in by_mode.items():
                    swept.append(
                        {
                            "transport": transport,
                            "mode": mode,
                            "calls": count,
                            "median_ms": statistics.median(values) * 1000,
                        }
                    )
    return {
        "benchmark": "dispatch",
        "params": {
            "calls": params.calls,
            "servers": params.servers,
            "latency_ms": params.latency * 1000,
            "repeat": params.repeat,
        },
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "trio": trio.__version__,
        },
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rows": rows,
        "sweep": swept,
    }


def plot(report: dict[str, Any], path: Path) -> None:
    # Imported by name: matplotlib is an optional extra, typed as Any here.
    importlib.import_module("matplotlib").use("Agg")
    plt = importlib.import_module("matplotlib.pyplot")

    transports = sorted({p["transport"] for p in report["sweep"]}, key=TRANSPORTS.index)
    figure, axes = plt.subplots(1, len(transports), figsize=(5 * len(transports), 4), squeeze=False)
    for ax, transport in zip(axes[0], transports, strict=True):
        for mode in MODES:
            points = [p for p in report["sweep"] if p["transport"] == transport and p["mode"] == mode]
            ax.plot([p["calls"] for p in points], [p["median_ms"] for p in points], marker="o", label=mode)
        ax.set_title(f"{transport}: {report['params']['servers']} servers, L = {report['params']['latency_ms']:g} ms")
        ax.set_xlabel("calls in the batch (N)")
        ax.set_ylabel("median wall time (ms)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    print(f"plot written to {path}")


def matplotlib_available() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


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
    sweep: list[int] = []
    if args.plot is not None:
        if matplotlib_available():
            sweep = [int(n) for n in args.sweep.split(",")]
        else:
            print("--plot: matplotlib is not installed (pip install 'yao-actors[plot]'); no plot", file=sys.stderr)
    params = Params(args.calls, args.servers, args.latency_ms / 1000, args.repeat)
    # Before any MCPServer configures the root logger at INFO (every HTTP request would be printed).
    logging.basicConfig(level=logging.WARNING)
    report = trio.run(run_benchmark, params, transports, sweep)
    print_table(report["rows"])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"figures written to {args.out}")
    if sweep:
        plot(report, args.plot)


if __name__ == "__main__":
    main()
