"""How does the websocket service hold up under K concurrent clients?

The service runs as its own process (``--serve``, so its peak RSS is its own): an assistant whose model (an
instant ``FunctionModel``) calls the test server's ``sleep`` tool (50 ms) once per turn for 3 turns, then
answers; the test server runs in process (``memory``) or as a stdio subprocess (``stdio``). K clients, each
on its own websocket over loopback, start one run at once and read it to its terminal event. The table shows
completed runs, errors, run latency percentiles against the ideal (turns × tool latency), runs per second
over the whole wave, and the service's peak RSS (``VmHWM``).

    python benchmarks/ws_load.py [--clients 200 1000] [--turns 3] [--tool-ms 50] [--transport memory]

Writes ``benchmarks/results/ws_load.json``. A benchmark, not a test: it asserts nothing. Loopback only.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import trio

from yao_actors.config import (
    AssistantSpec,
    Config,
    InMemoryTransport,
    ServerRef,
    ServerSpec,
    ServiceSpec,
    StdioTransport,
)
from yao_actors.models.base import Completion, ToolCall
from yao_actors.runtime import open_runtime
from yao_actors.service import serve_service
from yao_actors.service.chat import open_service_connection
from yao_actors.testing import FunctionModel
from yao_actors.testing.servers import build_test_server

RESULTS = Path(__file__).parent / "results" / "ws_load.json"
MAX_CLIENTS = 5000


# --------------------------------------------------------------------------- the service process


def _model(turns: int, tool_seconds: float) -> FunctionModel:
    """Call ``sleep`` once per turn for ``turns`` turns, then answer."""

    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        done = sum(1 for m in messages if m["role"] == "tool")
        if done < turns:
            arguments = json.dumps({"seconds": tool_seconds})
            return Completion(tool_calls=(ToolCall(f"call{done}", "s1__sleep", arguments),))
        return f"done after {done} tool calls"

    return FunctionModel(answer)


async def serve(turns: int, tool_seconds: float, transport: str) -> None:
    """Serve on a free loopback port, print ``LISTENING <url>``, stop on SIGTERM and print the peak RSS."""
    server_transport = (
        InMemoryTransport(build_test_server("s1"))
        if transport == "memory"
        else StdioTransport(sys.executable, ("-m", "yao_actors.testing.servers", "--name", "s1"))
    )
    config = Config(
        servers={"s1": ServerSpec("s1", server_transport, max_concurrency=MAX_CLIENTS, queue_size=MAX_CLIENTS)},
        assistants={"default": AssistantSpec(id="default", model="m", servers=(ServerRef("s1"),), max_turn=turns + 2)},
    )
    spec = ServiceSpec(host="127.0.0.1", port=0, max_connections=MAX_CLIENTS, max_runs=MAX_CLIENTS)
    with trio.open_signal_receiver(signal.SIGTERM) as signals:
        async with (
            open_runtime(config, models={"m": _model(turns, tool_seconds)}) as runtime,
            trio.open_nursery() as nursery,
        ):
            service = await nursery.start(serve_service, runtime, spec)
            print(f"LISTENING {service.url}", flush=True)
            async for _ in signals:
                break
            nursery.cancel_scope.cancel()


# --------------------------------------------------------------------------- the clients


async def one_client(url: str, index: int, latencies: list[float], errors: list[str]) -> None:
    """Run one conversation on its own connection; record its latency or its error."""
    run_id = f"load-{index}"
    frame = {"type": "run", "runId": run_id, "messages": [{"role": "user", "content": "go"}]}
    try:
        async with open_service_connection(url) as ws:
            started = time.perf_counter()
            await ws.send_message(json.dumps(frame))
            while True:
                event = json.loads(await ws.get_message())
                if event.get("runId") == run_id and event["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                    break
            if event["type"] == "RUN_ERROR":
                errors.append(str(event.get("code")))
            else:
                latencies.append(time.perf_counter() - started)
    except Exception as error:  # a benchmark counts failures instead of stopping at the first
        errors.append(type(error).__name__)


def peak_rss_mib(pid: int) -> float:
    """The peak resident set size of process ``pid`` (``VmHWM``), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def wave(clients: int, turns: int, tool_ms: float, transport: str) -> dict[str, Any]:
    """Start a fresh service, run ``clients`` conversations at once against it, and measure."""
    command = [sys.executable, __file__, "--serve", "--turns", str(turns), "--tool-ms", str(tool_ms)]
    command += ["--transport", transport]
    process = await trio.lowlevel.open_process(command, stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None
        line = b""
        while not line.endswith(b"\n"):
            line += await process.stdout.receive_some(1)
        url = line.decode().split()[1]
        latencies: list[float] = []
        errors: list[str] = []
        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for index in range(clients):
                nursery.start_soon(one_client, url, index, latencies, errors)
        elapsed = time.perf_counter() - started
        rss = peak_rss_mib(process.pid)
    finally:
        process.send_signal(signal.SIGTERM)
        with trio.move_on_after(30):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) >= 2 else [float("nan")] * 99
    return {
        "clients": clients,
        "completed": len(latencies),
        "errors": len(errors),
        "error_kinds": sorted(set(errors)),
        "ideal_ms": turns * tool_ms,
        "p50_ms": cuts[49] * 1000,
        "p95_ms": cuts[94] * 1000,
        "p99_ms": cuts[98] * 1000,
        "runs_per_s": len(latencies) / elapsed,
        "service_peak_rss_mib": rss,
    }


def print_table(rows: list[dict[str, Any]]) -> None:
    head = f"{'clients':>8} {'done':>6} {'errors':>6} {'ideal':>7} {'p50':>8} {'p95':>8} {'p99':>8} {'runs/s':>8} {'RSS MiB':>8}"
    print(head)
    for r in rows:
        print(
            f"{r['clients']:>8} {r['completed']:>6} {r['errors']:>6} {r['ideal_ms']:>5.0f}ms {r['p50_ms']:>6.0f}ms "
            f"{r['p95_ms']:>6.0f}ms {r['p99_ms']:>6.0f}ms {r['runs_per_s']:>8.1f} {r['service_peak_rss_mib']:>8.1f}"
        )


async def main(clients: list[int], turns: int, tool_ms: float, transport: str) -> None:
    rows = [await wave(k, turns, tool_ms, transport) for k in clients]
    print(f"{turns} turns × {tool_ms:.0f} ms tool per run, test server {transport}, one run per connection")
    print_table(rows)
    report = {
        "benchmark": "ws_load",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "turns": turns,
        "tool_ms": tool_ms,
        "transport": transport,
        "results": rows,
    }
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, nargs="+", default=[200], help="concurrent clients per wave")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--tool-ms", type=float, default=50.0)
    parser.add_argument("--transport", choices=["memory", "stdio"], default="memory")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        trio.run(serve, args.turns, args.tool_ms / 1000, args.transport)
    else:
        trio.run(main, [min(k, MAX_CLIENTS) for k in args.clients], args.turns, args.tool_ms, args.transport)
