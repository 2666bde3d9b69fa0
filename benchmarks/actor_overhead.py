"""What does the server actor cost per call, against the raw ``mcp`` client on the same transport?

Sequential calls and calls 20 at a time of the test server's trivial ``echo``
tool, through a server actor (mailbox, admission, per-call task, reply channel,
deadline scope) and through a raw ``mcp.Client`` connected by the same
``open_client`` (so the same transport code), in the same process. Runs of the
two alternate, in alternating order, round after round; the table shows the
median time per call of each, the difference, and the Trio scheduler batches a
sequential call takes on each path (a figure the machine's load cannot blur:
each hand-off between tasks costs one batch).

    python benchmarks/actor_overhead.py [--rounds 21] [--calls 100] [--transports memory stdio]

Writes ``benchmarks/results/actor_overhead.json``. A benchmark, not a test: it
asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from yao_actors.config import InMemoryTransport, ServerSpec, StdioTransport
from yao_actors.testing.servers import build_test_server
from yao_actors.tools.server_actor import ServerHandle, serve_mcp_server
from yao_actors.transports import Link, open_client

RESULTS = Path(__file__).parent / "results" / "actor_overhead.json"
WIDTH = 20

Call = Callable[[], Awaitable[Any]]


class BatchCounter(trio.abc.Instrument):
    """Counts Trio scheduler batches: the load-independent cost of a hand-off between tasks."""

    def __init__(self) -> None:
        self.batches = 0

    def after_io_wait(self, timeout: float) -> None:
        self.batches += 1


async def batches_per_call(call: Call, calls: int = 100) -> float:
    counter = BatchCounter()
    trio.lowlevel.add_instrument(counter)
    try:
        for _ in range(calls):
            await call()
    finally:
        trio.lowlevel.remove_instrument(counter)
    return counter.batches / calls


def make_spec(transport: str, server_id: str) -> ServerSpec:
    if transport == "memory":
        return ServerSpec(id=server_id, transport=InMemoryTransport(build_test_server(server_id)))
    command = StdioTransport(command=sys.executable, args=("-m", "yao_actors.testing.servers"))
    return ServerSpec(id=server_id, transport=command)


async def sequential(call: Call, calls: int) -> float:
    """Seconds per call, one call after the other."""
    start = time.perf_counter()
    for _ in range(calls):
        await call()
    return (time.perf_counter() - start) / calls


async def concurrent(call: Call, calls: int) -> float:
    """Seconds per call, ``WIDTH`` calls in flight at a time."""

    async def worker(share: int) -> None:
        for _ in range(share):
            await call()

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for i in range(WIDTH):
            nursery.start_soon(worker, calls // WIDTH + (1 if i < calls % WIDTH else 0))
    return (time.perf_counter() - start) / calls


async def measure(transport: str, rounds: int, calls: int) -> list[dict[str, Any]]:
    arguments = {"text": "x"}
    samples: dict[tuple[str, str], list[float]] = {}
    async with trio.open_nursery() as nursery:
        handle: ServerHandle = await nursery.start(serve_mcp_server, make_spec(transport, "actor"))
        async with open_client(make_spec(transport, "raw"), link=Link()) as client:

            async def via_actor() -> None:
                outcome = await handle.call_tool("echo", arguments)
                assert outcome.ok, outcome

            async def via_raw() -> None:
                result = await client.call_tool("echo", arguments)
                assert not result.is_error, result

            paths = {"raw": via_raw, "actor": via_actor}
            for run in (sequential, concurrent):  # warm-up
                for call in paths.values():
                    await run(call, min(calls, 50))
            batches = {path: await batches_per_call(call) for path, call in paths.items()}
            for round_number in range(rounds):
                order = ["raw", "actor"] if round_number % 2 == 0 else ["actor", "raw"]
                for run in (sequential, concurrent):
                    for path in order:
                        samples.setdefault((run.__name__, path), []).append(await run(paths[path], calls))
        nursery.cancel_scope.cancel()
    rows = []
    for mode in ("sequential", "concurrent"):
        raw = statistics.median(samples[(mode, "raw")])
        actor = statistics.median(samples[(mode, "actor")])
        rows.append(
            {
                "transport": transport,
                "mode": mode if mode == "sequential" else f"{WIDTH} concurrent",
                "raw_us": round(raw * 1e6, 1),
                "actor_us": round(actor * 1e6, 1),
                "overhead_us": round((actor - raw) * 1e6, 1),
                "ratio": round(actor / raw, 3),
                "raw_batches": batches["raw"],
                "actor_batches": batches["actor"],
            }
        )
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    header = (
        f"{'transport':<10} {'mode':<14} {'raw µs/call':>12} {'actor µs/call':>14} {'overhead µs':>12} "
        f"{'ratio':>7} {'batches raw/actor':>18}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        print(
            f"{row['transport']:<10} {row['mode']:<14} {row['raw_us']:>12.1f} {row['actor_us']:>14.1f} "
            f"{row['overhead_us']:>12.1f} {row['ratio']:>7.3f} {row['raw_batches']:>9.2f}/{row['actor_batches']:<8.2f}"
        )


async def main(rounds: int, calls: int, transports: list[str]) -> dict[str, Any]:
    load = [round(x, 2) for x in os.getloadavg()]
    rows: list[dict[str, Any]] = []
    for transport in transports:
        rows.extend(await measure(transport, rounds, calls))
    load_at_end = [round(x, 2) for x in os.getloadavg()]
    print_table(rows)
    return {
        "benchmark": "actor_overhead",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_average_at_start": load,
        "load_average_at_end": load_at_end,
        "rounds": rounds,
        "calls_per_run": calls,
        "unit": "median microseconds per call over the rounds",
        "results": rows,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=21)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--transports", nargs="+", default=["memory", "stdio"], choices=["memory", "stdio"])
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the JSON figures go")
    args = parser.parse_args()
    report = trio.run(main, args.rounds, args.calls, args.transports)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwritten to {args.out}")
