"""Benchmark: what keeping 1,000 open MCP tasks polled costs one worker, as a share of one core.

A worker that takes up runs waiting on tasks (issue 41) polls each task at the interval its server asks for
(``pollIntervalMs``) until it ends. This measures that polling alone: the 2026-07-28 tasks-extension test server
(``yao_actors.testing.task_servers``) runs over streamable HTTP as its own process (its CPU is not counted), asked
for ``--tasks`` tasks that never end (``forever``, created up front with plain HTTP requests, not measured); this
process runs a runtime with one server handle to it and polls every task through
``ServerHandle.poll_task`` (what a worker does with a stored handle), their first polls spread over one interval
(as tasks created at different times are; all at once, most polls of the burst would find the server handle's
queue full and wait an interval). After a warm-up of one poll
interval, the CPU time of this process (``time.process_time``) over ``--window`` seconds of wall time is the share
of one core the polling costs; the server's count of the ``tasks/get`` it answered meanwhile gives the polls per
second and the CPU per poll.

Rows: one per ``--intervals`` (milliseconds the server asks between polls; 5 s is the extension's example),
interleaved by repetition (``--repeat``), medians printed. The target: under 5 % of a core.
Figures go to ``benchmarks/results/tasks.json``. This measures; it asserts nothing.

Run from the repository root: ``python benchmarks/tasks.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import httpx2
import trio

from yao_actors.config import Config, ServerSpec
from yao_actors.runtime import open_runtime
from yao_actors.testing.processes import open_http_task_server
from yao_actors.tools.task_handle import TaskDesign, TaskHandle
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


async def measure(count: int, interval_ms: int, window: float) -> dict[str, Any]:
    """One row: ``count`` tasks polled every ``interval_ms`` by one runtime; this process's CPU share."""
    async with open_http_task_server(poll_ms=interval_ms) as server:
        url = await server.url()
        ids = await create_tasks(url, count)
        spec = ServerSpec("tasks", HttpTransport(url), timeout=30.0)
        async with open_runtime(Config(servers={"tasks": spec}), ready_timeout=30) as runtime:
            tool_server = runtime.servers["tasks"]
            async with trio.open_nursery() as nursery:
                for task_id in ids:  # spread over one interval, as tasks created at different times are
                    nursery.start_soon(tool_server.poll_task, handle(task_id, interval_ms / 1000), CallOptions())
                    await trio.sleep(interval_ms / 1000 / count)
                await trio.sleep(interval_ms / 1000)  # warm-up: every task polled once at least
                polls, cpu, wall = await polls_answered(url), time.process_time(), time.perf_counter()
                await trio.sleep(window)
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                polls = await polls_answered(url) - polls
                nursery.cancel_scope.cancel()  # each wait ends with its tasks/cancel (shielded, bounded)
    share, per_poll = cpu / wall, cpu / max(polls, 1) * 1e6
    return {
        "tasks": count,
        "interval_ms": interval_ms,
        "window_s": wall,
        "cpu_s": cpu,
        "polls": polls,
        "core_share": share,
        "cpu_us_per_poll": per_poll,
    }


async def main(args: argparse.Namespace) -> None:
    rows: dict[int, list[dict[str, Any]]] = {interval: [] for interval in args.intervals}
    load = os.getloadavg()
    for _ in range(args.repeat):
        for interval in args.intervals:
            rows[interval].append(await measure(args.tasks, interval, args.window))
    print(f"{args.tasks} open tasks polled by one worker (load average at start {load[0]:.2f})")
    print(f"{'interval':>10} {'polls/s':>9} {'core share':>11} {'CPU µs/poll':>12}")
    summary = []
    for interval, runs in rows.items():
        share = statistics.median(r["core_share"] for r in runs)
        polls = statistics.median(r["polls"] / r["window_s"] for r in runs)
        per_poll = statistics.median(r["cpu_us_per_poll"] for r in runs)
        print(f"{interval:>8}ms {polls:>9.0f} {share:>10.2%} {per_poll:>12.0f}")
        summary.append({"interval_ms": interval, "polls_per_s": polls, "core_share_median": share, "runs": runs})
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"load_average": load, "rows": summary}, indent=2), encoding="utf-8")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--intervals", type=int, nargs="+", default=[5000, 30000])
    parser.add_argument("--window", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=3)
    trio.run(main, parser.parse_args())
