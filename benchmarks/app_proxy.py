"""Benchmark: what an MCP App's proxied ``tools/call`` costs beyond the call itself.

An in-process MCP server with an app (``show``, whose ``_meta.ui.resourceUri`` is ``ui://show/app.html``) and an
in-memory store. Threads are prepared first: on each, ``--runs`` values of runs whose model (an instant
``FunctionModel``) calls ``show`` once, so the app's activity is stored ``runs`` times. Then, interleaved, repetition
by repetition, ``--calls`` calls of ``show`` each:

- ``handle``: ``ServerHandle.call_tool`` on the server's actor (what a model's call costs at the bottom);
- ``proxy N``: ``Runtime.app_request`` for the same call on a thread of N runs, each of which showed the app: the
  checks (the thread's owner, that the app was shown on it: its stored events are read, newest run first),
  dispatch (the schema gate, the deadline, metrics), the answer's size;
- ``proxy N, shown first``: the same on a thread whose first run showed the app and whose N - 1 others did not
  (the most events read).

Printed: the median µs of wall time and of this process's CPU per call for each row. Figures go to
``benchmarks/results/app_proxy.json``. This measures; it asserts nothing. Run from the repository root:
``python benchmarks/app_proxy.py``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio
from figures import load_average, machine, print_medians, write
from mcp.server.mcpserver import MCPServer

from yao_actors.config import AssistantSpec, Config, InMemoryTransport, ServerRef, ServerSpec
from yao_actors.conversation.app_requests import AppRequest
from yao_actors.models.base import Completion, ToolCall
from yao_actors.runtime import Runtime, open_runtime
from yao_actors.testing import FunctionModel

APP_URI = "ui://show/app.html"


def app_server() -> MCPServer:
    server = MCPServer("apps")

    @server.tool(description="Shows a value in its app.", meta={"ui": {"resourceUri": APP_URI}})
    async def show(value: int) -> dict[str, Any]:
        return {"value": value}

    return server


def shows(messages: list[dict[str, Any]], tools: Any) -> Any:
    if messages[-1]["role"] == "user" and messages[-1]["content"] == "show":
        return Completion(tool_calls=[ToolCall("c1", "apps__show", {"value": 1})])
    return "shown"


async def timed(call: Callable[[], Awaitable[Any]], calls: int) -> tuple[float, float]:
    """Wall and CPU µs per call of ``calls`` calls."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        await call()
    return (time.perf_counter() - wall) / calls * 1e6, (time.process_time() - cpu) / calls * 1e6


async def measure(runtime: Runtime, sizes: list[int], repeat: int, calls: int) -> dict[str, list[tuple[float, float]]]:
    for size in sizes:
        for run in range(size):
            await runtime.run("default", "show", thread_id=f"t{size}")
            await runtime.run("default", "show" if run == 0 else "hello", thread_id=f"first{size}")
    handle = runtime.servers["apps"]
    rows: dict[str, Callable[[], Awaitable[Any]]] = {"handle": lambda: handle.call_tool("show", {"value": 2})}
    for size in sizes:
        request = AppRequest(f"t{size}", "tools/call", {"name": "show", "arguments": {"value": 2}}, "apps")
        rows[f"proxy {size}"] = lambda request=request: runtime.app_request(request)  # type: ignore[misc]
        first = AppRequest(f"first{size}", "tools/call", {"name": "show", "arguments": {"value": 2}}, "apps")
        rows[f"proxy {size}, shown first"] = lambda request=first: runtime.app_request(request)  # type: ignore[misc]
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in rows}
    for repetition in range(repeat):
        order = list(rows) if repetition % 2 == 0 else list(reversed(rows))
        for name in order:
            samples[name].append(await timed(rows[name], calls))
    return samples


async def main(args: argparse.Namespace) -> None:
    load = load_average()
    assistant = AssistantSpec(id="default", model="m", servers=(ServerRef("apps"),))
    config = Config(
        servers={"apps": ServerSpec("apps", InMemoryTransport(app_server()))}, assistants={"default": assistant}
    )
    async with open_runtime(config, models={"m": FunctionModel(shows, stream=False)}) as runtime:
        samples = await measure(runtime, args.runs, args.repeat, args.calls)
    for index, figure in enumerate(("wall µs/call", "CPU µs/call")):
        rows = {
            name: (statistics.median(s[index] for s in got), [s[index] for s in got]) for name, got in samples.items()
        }
        print_medians("row", figure, rows)
        print()
    report = {
        "machine": machine(load, runs=args.runs, repeat=args.repeat, calls=args.calls),
        "rows": {
            name: {"wall_us": [s[0] for s in got], "cpu_us": [s[1] for s in got]} for name, got in samples.items()
        },
    }
    write(args.out, report)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, nargs="+", default=[1, 30, 100], help="runs on each thread measured")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--calls", type=int, default=50, help="calls per row and repetition")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "app_proxy.json")
    trio.run(main, parser.parse_args())
