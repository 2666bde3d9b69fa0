"""Benchmark: what keeping 1,000 open MCP tasks polled costs one worker, as a share of one core.

A worker that takes up runs waiting on tasks (issue 41) polls each task at the interval its server asks for
(``pollIntervalMs``) until it ends. This measures that polling alone: the 2026-07-28 tasks-extension test server
(``yao_actors.testing.task_servers``) runs over streamable HTTP as its own process (its CPU is not counted), asked
for ``--tasks`` tasks that never end (``forever``, created up front with plain HTTP requests, not measured); this
process runs a runtime with one server handle to it and polls every task through
``ServerHandle.poll_task`` (what a worker does with a stored handle), all taken up at once as a restarted worker
takes them up (the runtime spreads their first polls over one interval itself). After a warm-up of two poll
intervals, the CPU time of this process (``time.process_time``) over ``--window`` seconds of wall time is the share
of one core the polling costs; the server's count of the ``tasks/get`` it answered meanwhile gives the polls per
second and the CPU per poll.

The floor: the raw ``mcp`` client (``mcp.Client`` on the same URL, the tasks extension declared) sending one
``tasks/get`` after another for the same tasks, in the same sitting: its CPU µs per request is what the SDK and
the HTTP client alone cost for a poll, which no runtime on them can go under. ``--profile FILE`` writes a cProfile
of the first row's window, split by layer (``profile_layers.py``).

Rows: one per ``--intervals`` (milliseconds the server asks between polls; 5 s is the extension's example),
interleaved by repetition (``--repeat``), medians printed. The target: under 5 % of a core.
Figures go to ``benchmarks/results/tasks.json``. This measures; it asserts nothing.

Run from the repository root: ``python benchmarks/tasks.py``.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import httpx2
import mcp
import profile_layers
import trio

from yao_actors.config import Config, ServerSpec
from yao_actors.runtime import open_runtime
from yao_actors.store.task_handle import TaskDesign, TaskHandle
from yao_actors.testing.processes import open_http_task_server
from yao_actors.tools.task_wire import DetailedTask, GetTask, TaskIdParams, TasksExtension
from yao_actors.tools.tool_server import CallOptions
from yao_actors.transport_specs import HttpTransport

RESULTS = Path(__file__).parent / "results" / "tasks.json"
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
}


async def call(client: httpx2.AsyncClient, url: str, tool: str) -> dict[str, Any]:
    """One plain ``tools/call`` of ``tool`` that declares the tasks extension; its result."""
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call",
        "Mcp-Name": tool,
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "_meta": META}}
    answer = await client.post(url, json=body, headers=headers)
    result: dict[str, Any] = answer.json()["result"]
    return result


async def polls_answered(url: str) -> int:
    """The ``tasks/get`` requests the task server answered so far."""
    async with httpx2.AsyncClient(timeout=30) as client:
        return int((await call(client, url, "task_stats"))["structuredContent"]["polls"])


async def create_tasks(url: str, count: int) -> list[str]:
    """``count`` tasks that never end, made with plain requests (setup, not measured); their ids."""
    async with httpx2.AsyncClient(timeout=30) as client:
        return [(await call(client, url, "forever"))["taskId"] for _ in range(count)]


def handle(task_id: str, interval: float) -> TaskHandle:
    now = time.time()
    return TaskHandle(
        server="tasks",
        task_id=task_id,
        design=TaskDesign.EXTENSION,
        call_id=f"call-{task_id}",
        tool="forever",
        arguments={},
        run_id="bench",
        thread_id="bench",
        created_at=now,
        deadline=now + 3600,
        poll_interval=interval,
    )


async def floor(url: str, ids: list[str]) -> float:
    """The raw SDK's CPU µs per ``tasks/get``: one request after another for ``ids``, on one ``mcp.Client``."""
    async with mcp.Client(url, extensions=[TasksExtension()], cache=None) as client:
        get = client.session.send_request
        await get(GetTask(params=TaskIdParams(task_id=ids[0])), DetailedTask)  # warm-up
        cpu = time.process_time()
        for task_id in ids:
            await get(GetTask(params=TaskIdParams(task_id=task_id)), DetailedTask)
        return (time.process_time() - cpu) / len(ids) * 1e6


async def measure(count: int, interval_ms: int, window: float, profile: Path | None) -> dict[str, Any]:
    """One row: ``count`` tasks polled every ``interval_ms`` by one runtime; this process's CPU share."""
    async with open_http_task_server(poll_ms=interval_ms) as server:
        url = await server.url()
        ids = await create_tasks(url, count)
        raw_us = await floor(url, ids)
        spec = ServerSpec("tasks", HttpTransport(url), timeout=30.0)
        async with open_runtime(Config(servers={"tasks": spec}), ready_timeout=30) as runtime:
            tool_server = runtime.servers["tasks"]
            async with trio.open_nursery() as nursery:
                for task_id in ids:  # all at once, as a restarted worker takes up its stored tasks
                    nursery.start_soon(tool_server.poll_task, handle(task_id, interval_ms / 1000), CallOptions())
                await trio.sleep(2 * interval_ms / 1000)  # warm-up: every task polled once at least
                profiler = cProfile.Profile() if profile is not None else None
                polls, cpu, wall = await polls_answered(url), time.process_time(), time.perf_counter()
                if profiler is not None:
                    profiler.enable()
                await trio.sleep(window)
                if profiler is not None:
                    profiler.disable()
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                polls = await polls_answered(url) - polls
                nursery.cancel_scope.cancel()  # each wait ends with its tasks/cancel (shielded, bounded)
    if profiler is not None and profile is not None:
        profiler.dump_stats(profile)
    share, per_poll = cpu / wall, cpu / max(polls, 1) * 1e6
    return {
        "tasks": count,
        "interval_ms": interval_ms,
        "window_s": wall,
        "cpu_s": cpu,
        "polls": polls,
        "core_share": share,
        "cpu_us_per_poll": per_poll,
        "raw_cpu_us_per_get": raw_us,
    }


async def main(args: argparse.Namespace) -> None:
    rows: dict[int, list[dict[str, Any]]] = {interval: [] for interval in args.intervals}
    load = os.getloadavg()
    for repetition in range(args.repeat):
        for interval in args.intervals:
            profile = args.profile if repetition == 0 and interval == args.intervals[0] else None
            rows[interval].append(await measure(args.tasks, interval, args.window, profile))
    print(f"{args.tasks} open tasks polled by one worker (load average at start {load[0]:.2f})")
    print(f"{'interval':>10} {'polls/s':>9} {'core share':>11} {'CPU µs/poll':>12} {'raw SDK µs/get':>15}")
    summary = []
    for interval, runs in rows.items():
        share = statistics.median(r["core_share"] for r in runs)
        polls = statistics.median(r["polls"] / r["window_s"] for r in runs)
        per_poll = statistics.median(r["cpu_us_per_poll"] for r in runs)
        raw = statistics.median(r["raw_cpu_us_per_get"] for r in runs)
        print(f"{interval:>8}ms {polls:>9.0f} {share:>10.2%} {per_poll:>12.0f} {raw:>15.0f}")
        summary.append({"interval_ms": interval, "polls_per_s": polls, "core_share_median": share, "runs": runs})
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"load_average": load, "rows": summary}, indent=2), encoding="utf-8")
    if args.profile is not None:
        first = rows[args.intervals[0]][0]
        print(f"\nthe {args.intervals[0]} ms row's window by layer, per poll (cProfile, {args.profile}):")
        profile_layers.main([str(args.profile), "--runs", str(first["polls"]), "--unit", "poll"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--intervals", type=int, nargs="+", default=[5000, 30000])
    parser.add_argument("--window", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", type=Path, help="write a cProfile of the first row's window to this file")
    trio.run(main, parser.parse_args())
