"""Benchmark: what the conversation store costs per turn, and what idle threads cost a process.

Two measurements:

- **Per-turn cost** of each store (memory; SQLite in a temporary folder; Redis, a
  ``redis-server`` started on a free loopback port in a temporary folder, without
  an append-only file, or ``--redis-url``): what a run's journal writes per turn,
  one turn (an assistant message with two tool calls and their two tool
  messages) with a batch of ``--events`` AG-UI events, in one ``append_turn``
  (one SQLite transaction, one Redis script); beside it the same written as
  before, ``append_messages`` then ``append_events`` (two writes). Rows
  interleave, turn by turn, over ``--turns`` turns after a warm-up; printed: the
  median wall time of a turn's write and this process's CPU per turn (the
  SQLite worker thread's included, the Redis server's not), and each store's
  ratio to the memory store.
- **Idle threads**: a fresh process opens a SQLite store, creates
  ``--threads`` threads (each with a run, its question and a one-turn answer) and
  keeps none of them in memory; its RSS growth is printed (target: well under
  20 MB for 10,000 threads). The same through a runtime (``open_runtime`` over a
  SQLite store, one run per thread with an instant model, as the service does):
  the runtime keeps at most 1000 threads in memory and the store all of them;
  its RSS growth from the first threads to the last is printed (target: ~20 MB).

Figures go to ``benchmarks/results/store.json``. This measures; it asserts
nothing. Run from the repository root: ``python benchmarks/store.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from yao_actors.config import AssistantSpec, Config
from yao_actors.events import stored_events
from yao_actors.models import FunctionModel
from yao_actors.runtime import open_runtime
from yao_actors.store import ConversationStore, RunStatus, StoreSpec, open_store
from yao_actors.testing.redis_server import RedisServer

ROOT = Path(__file__).resolve().parent.parent

TURN = [
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "weather__get", "arguments": '{"city": "Beijing"}'}},
            {"id": "c2", "type": "function", "function": {"name": "clothing__advise", "arguments": '{"temp": 3}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": '{"city": "Beijing", "temp": 3, "wind": 5}'},
    {"role": "tool", "tool_call_id": "c2", "content": '{"advice": "a warm coat"}'},
]


def event(run_id: str, seq: int) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "word ", "runId": run_id, "seq": seq}


WAYS = ("append_turn", "two_writes")
"""How a turn is written: one ``append_turn``, or ``append_messages`` then ``append_events``."""


@attrs.define
class Bench:
    """One store's thread and run, and the turns written so far."""

    store: ConversationStore
    seq: int = 0
    wall: dict[str, list[float]] = attrs.field(factory=lambda: {way: [] for way in WAYS})
    cpu: dict[str, float] = attrs.field(factory=lambda: dict.fromkeys(WAYS, 0.0))

    async def open(self) -> None:
        await self.store.open_thread("bench", None)
        await self.store.start_run("bench", "run", "default", [{"role": "user", "content": "weather?"}])

    async def turn(self, way: str, batch: int, *, measured: bool) -> None:
        events = stored_events(event("run", self.seq + i + 1) for i in range(batch))  # as the journal gives them
        self.seq += batch
        started, started_cpu = time.perf_counter(), time.process_time()
        if way == "append_turn":
            await self.store.append_turn("bench", "run", TURN, events)
        else:
            await self.store.append_messages("bench", TURN)
            await self.store.append_events("run", events)
        if measured:
            self.cpu[way] += time.process_time() - started_cpu
            self.wall[way].append(time.perf_counter() - started)


async def per_turn(stores: dict[str, ConversationStore], turns: int, batch: int) -> dict[str, dict[str, float]]:
    """Per store and way: the median wall ms of one turn's write and the CPU ms per turn, rows interleaved."""
    benches = {name: Bench(store) for name, store in stores.items()}
    for bench in benches.values():
        await bench.open()
    for index in range(turns + 10):
        for way in WAYS if index % 2 == 0 else WAYS[::-1]:
            for bench in benches.values():
                await bench.turn(way, batch, measured=index >= 10)  # the first ten warm up
    for bench in benches.values():
        await bench.store.finish_run("run", status=RunStatus.FINISHED, outcome="answered")
    figures = {}
    for name, bench in benches.items():
        for way in WAYS:
            figures.setdefault(name, {})[f"{way}_ms"] = statistics.median(bench.wall[way]) * 1000
            figures[name][f"{way}_cpu_ms"] = bench.cpu[way] / turns * 1000
    return figures


@asynccontextmanager
async def redis_spec(url: str | None, folder: Path) -> AsyncIterator[StoreSpec]:
    if url is not None:
        yield StoreSpec("redis", url=url, prefix=f"bench-{time.time_ns()}:")
        return
    server = RedisServer(folder, append_only=False)
    server.start()
    try:
        yield StoreSpec("redis", url=server.url, prefix="bench:")
    finally:
        server.stop()


async def measure_stores(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as folder:
        async with AsyncExitStack() as stack:
            specs = {"memory": StoreSpec("memory"), "sqlite": StoreSpec.sqlite(Path(folder) / "bench.sqlite3")}
            specs["redis"] = await stack.enter_async_context(redis_spec(args.redis_url, Path(folder)))
            stores = {name: await stack.enter_async_context(open_store(spec)) for name, spec in specs.items()}
            return await per_turn(stores, args.turns, args.events)


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


async def idle_threads_child(path: str, threads: int) -> None:
    """Create the threads in a fresh process and print its RSS before and after, in KiB, as JSON."""
    async with open_store(StoreSpec.sqlite(path)) as store:
        await store.open_thread("warm-up", None)  # the first write's one-off allocations are not the threads'
        before = rss_kib()
        for index in range(threads):
            thread_id, run_id = f"thread-{index}", f"run-{index}"
            await store.open_thread(thread_id, "alice")
            await store.start_run(thread_id, run_id, "default", [{"role": "user", "content": f"question {index}"}])
            await store.append_messages(thread_id, [*TURN, {"role": "assistant", "content": "wear a coat"}])
            await store.finish_run(run_id, status=RunStatus.FINISHED, outcome="answered")
        after = rss_kib()
        listed = len(await store.list_threads("alice", limit=threads))
    print(json.dumps({"before_kib": before, "after_kib": after, "threads": listed}))


async def idle_runtime_child(path: str, threads: int) -> None:
    """One run on each of ``threads`` new threads through a runtime over SQLite; print RSS before and after."""
    config = Config(assistants={"a": AssistantSpec("a", "m")}, store=StoreSpec.sqlite(path))
    model = FunctionModel(lambda messages, tools: "wear a coat")
    async with open_runtime(config, models={"m": model}) as runtime:
        for index in range(20):  # the first runs' one-off allocations are not the threads'
            await runtime.run("a", f"question {index}", thread_id=f"warm-up-{index}")
        before = rss_kib()
        for index in range(threads):
            await runtime.run("a", f"question {index}", thread_id=f"thread-{index}", principal="alice")
            model.calls.clear()
        after = rss_kib()
        listed = len(await runtime.threads(principal="alice", limit=threads))
        in_memory = runtime.conversations.statistics().threads
    print(json.dumps({"before_kib": before, "after_kib": after, "threads": listed, "in_memory": in_memory}))


def measure_idle_threads(threads: int, child: str = "--idle-child") -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        output = subprocess.run(
            [sys.executable, __file__, child, str(Path(folder) / "idle.sqlite3"), "--threads", str(threads)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        elapsed = time.perf_counter() - started
        size = (Path(folder) / "idle.sqlite3").stat().st_size
    child = json.loads(output)
    return {
        "threads": child["threads"],
        "in_memory": child.get("in_memory"),
        "rss_growth_mb": (child["after_kib"] - child["before_kib"]) / 1024,
        "file_mb": size / 1e6,
        "seconds": elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=300, help="turns measured per store")
    parser.add_argument("--events", type=int, default=10, help="events per appended batch")
    parser.add_argument("--threads", type=int, default=10_000, help="idle threads created in the RSS measurement")
    parser.add_argument("--redis-url", help="use this Redis server instead of starting one")
    parser.add_argument("--idle-child", metavar="PATH", help=argparse.SUPPRESS)
    parser.add_argument("--idle-runtime-child", metavar="PATH", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.idle_child:
        trio.run(idle_threads_child, args.idle_child, args.threads)
        return
    if args.idle_runtime_child:
        trio.run(idle_runtime_child, args.idle_runtime_child, args.threads)
        return

    stores = trio.run(measure_stores, args)
    print(f"a turn's write (3 messages and {args.events} events), median wall ms and CPU ms per turn of {args.turns}:")
    print(f"  {'store':<8} {'append_turn':>12} {'cpu':>7} {'cpu vs memory':>14}   {'two writes':>11} {'cpu':>7}")
    memory_cpu = stores["memory"]["append_turn_cpu_ms"]
    for name, row in stores.items():
        row["append_turn_cpu_vs_memory"] = row["append_turn_cpu_ms"] / memory_cpu
        print(
            f"  {name:<8} {row['append_turn_ms']:>9.3f} ms {row['append_turn_cpu_ms']:>7.3f}"
            f" {row['append_turn_cpu_vs_memory']:>14.2f}   {row['two_writes_ms']:>8.3f} ms {row['two_writes_cpu_ms']:>7.3f}"
        )
    idle = measure_idle_threads(args.threads)
    print(
        f"{idle['threads']} idle threads in SQLite: RSS grew {idle['rss_growth_mb']:.1f} MB"
        f" (file {idle['file_mb']:.1f} MB, {idle['seconds']:.1f} s)"
    )
    runtime_idle = measure_idle_threads(args.threads, "--idle-runtime-child")
    print(
        f"{runtime_idle['threads']} idle threads through a runtime over SQLite ({runtime_idle['in_memory']} kept in"
        f" memory): RSS grew {runtime_idle['rss_growth_mb']:.1f} MB (target ~20 MB; {runtime_idle['seconds']:.1f} s)"
    )
    results = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "args": {"turns": args.turns, "events": args.events, "threads": args.threads},
        "per_turn": stores,
        "idle_threads": idle,
        "idle_threads_runtime": runtime_idle,
    }
    out = ROOT / "benchmarks" / "results" / "store.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"figures written to {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
