"""What do the dependencies alone cost for what one ``ws_load`` run does? The floor under the service's CPU per run.

A ``ws_load`` run is: a websocket connection (handshake), one ``run`` frame in, three calls of the in-memory test
server's ``sleep`` tool through the MCP SDK, and 25 events out, in four bursts (one per turn). This benchmark does
each half of that with the libraries alone, none of this project's code in the path, and in the same shape:

- ``mcp``: a raw ``mcp`` client on the SDK's in-memory transport to the same test server (built by
  ``build_test_server``, in process, as in ``ws_load``), K "runs" at once, each three sequential ``sleep`` calls.
  The figure is this process's CPU per run: the SDK's client and server sides, and Trio under them.
- ``websocket``: a plain ``trio-websocket`` server in its own process (``--serve``) that takes each connection,
  reads one frame, and sends a real run's 25 event texts (recorded from the runtime at the start) in its four
  bursts, ``tool-ms`` apart, each event its own message; K clients at once. The figure is that process's CPU per
  connection (``/proc/<pid>/stat``, as ``ws_load`` measures the service).
- ``own websocket`` (beside the floor, not in it): the same server on the service's own websocket
  (:class:`~yao_actors.service.websocket.ServerWebSocket`: wsproto read in the connection's task, a burst in one
  write): what serving the websocket itself saves over trio-websocket's server, with nothing else in the path.

Each part runs under the service's garbage-collector policy (:func:`~yao_actors.service.heap.keep_heap`: what
start-up made frozen, rarer young passes), as ``ws_load``'s service does.

Their sum is what any service built on these libraries spends per run before doing anything of its own: compare
it with ``ws_load``'s service CPU per run taken in the same sitting (``--with-service`` runs ``ws_load`` once
between the repeats). CPU, not wall time: the figures hold under load far better than latency does.

    python benchmarks/floor.py [--clients 200] [--repeat 3] [--with-service]

Writes ``benchmarks/results/floor.json`` (``--out``). A benchmark, not a test: it asserts nothing. Loopback only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import figures
import trio
from trio_websocket import ConnectionClosed, WebSocketRequest, open_websocket_url, serve_websocket

from yao_actors.config import AssistantSpec, Config, InMemoryTransport, ServerRef, ServerSpec
from yao_actors.models.base import Completion, ToolCall
from yao_actors.runtime import open_runtime
from yao_actors.service.gate import read_head
from yao_actors.service.heap import keep_heap
from yao_actors.service.websocket import ServerWebSocket
from yao_actors.testing import FunctionModel
from yao_actors.testing.servers import build_test_server
from yao_actors.transports import Link, open_client

RESULTS = Path(__file__).parent / "results" / "floor.json"
HERE = Path(__file__).parent


def _model(turns: int, tool_seconds: float) -> FunctionModel:
    """The ``ws_load`` assistant's model: ``sleep`` once per turn for ``turns`` turns, then an answer."""

    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        done = sum(1 for m in messages if m["role"] == "tool")
        if done < turns:
            return Completion(tool_calls=(ToolCall(f"call{done}", "s1__sleep", json.dumps({"seconds": tool_seconds})),))
        return f"done after {done} tool calls"

    return FunctionModel(answer, stream=False)


async def record_bursts(turns: int, tool_seconds: float) -> list[list[str]]:
    """A real ``ws_load`` run's events as the service encodes them, split into the bursts a client receives
    (a burst ends with each tool call's start, while the tool runs)."""
    config = Config(
        servers={"s1": ServerSpec(id="s1", transport=InMemoryTransport(build_test_server("s1")))},
        assistants={"default": AssistantSpec(id="default", model="m", servers=(ServerRef("s1"),), max_turn=turns + 2)},
    )
    async with open_runtime(config, models={"m": _model(turns, tool_seconds)}) as runtime:
        result = await runtime.run("default", [{"role": "user", "content": "go"}])
    bursts: list[list[str]] = [[]]
    for event in result.events:
        bursts[-1].append(json.dumps(event, ensure_ascii=False, separators=(",", ":")))
        if event["type"] == "TOOL_CALL_END":
            bursts.append([])
    return [burst for burst in bursts if burst]


# --------------------------------------------------------------------------- mcp


async def mcp_cpu_per_run(clients: int, turns: int, tool_seconds: float) -> float:
    """CPU ms per run of ``clients`` concurrent runs of ``turns`` raw SDK ``sleep`` calls each, in memory."""
    spec = ServerSpec(id="s1", transport=InMemoryTransport(build_test_server("s1")))
    async with open_client(spec, link=Link()) as client:

        async def one_run() -> None:
            for _ in range(turns):
                result = await client.call_tool("sleep", {"seconds": tool_seconds})
                assert not result.is_error, result

        await one_run()  # warm-up
        async with trio.open_nursery() as keeper:
            await keeper.start(keep_heap)  # the service's collector policy (cancelled, it puts the collector back)
            before = time.process_time()
            async with trio.open_nursery() as nursery:
                for _ in range(clients):
                    nursery.start_soon(one_run)
            spent = time.process_time() - before
            keeper.cancel_scope.cancel()
        return spent * 1000 / clients


# --------------------------------------------------------------------------- websocket


async def serve_bursts_own(bursts: list[list[str]], tool_seconds: float) -> None:
    """The ``--serve --own`` process: the service's own websocket, each burst in one write."""

    async def handler(stream: trio.SocketStream) -> None:
        ws = ServerWebSocket(stream, max_message_size=1 << 20)
        try:
            head = await read_head(stream)
            request = None if head is None else await ws.handshake(head)
            if request is None:
                return
            await ws.accept(request, None)
            message = await ws.get_message()
            assert message is not None
            json.loads(message)  # the run frame
            for index, burst in enumerate(bursts):
                if index:
                    await trio.sleep(tool_seconds)
                await ws.send_messages(burst)
            await ws.get_message()  # until the client closes
        except ConnectionClosed:
            pass
        finally:
            await trio.aclose_forcefully(stream)

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    async with trio.open_nursery() as nursery:
        await nursery.start(keep_heap)  # the service's collector policy
        print(f"LISTENING ws://127.0.0.1:{listeners[0].socket.getsockname()[1]}/", flush=True)
        await trio.serve_listeners(handler, listeners)


async def serve_bursts(bursts: list[list[str]], tool_seconds: float) -> None:
    """The ``--serve`` process: a plain trio-websocket server sending each connection the recorded bursts."""

    async def handler(request: WebSocketRequest) -> None:
        ws = await request.accept()
        try:
            json.loads(await ws.get_message())  # the run frame
            for index, burst in enumerate(bursts):
                if index:
                    await trio.sleep(tool_seconds)
                for text in burst:
                    await ws.send_message(text)
            await ws.get_message()  # until the client closes
        except ConnectionClosed:
            pass

    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve_websocket, handler, "127.0.0.1", 0, None)
        await nursery.start(keep_heap)  # the service's collector policy
        print(f"LISTENING ws://127.0.0.1:{server.port}/", flush=True)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def websocket_cpu_per_run(
    bursts_file: Path, expected: int, clients: int, tool_seconds: float, *, own: bool = False
) -> float:
    """The plain websocket server's CPU ms per connection over a wave of ``clients`` at once (``own``: the
    service's own websocket instead of trio-websocket's server)."""
    command = [sys.executable, __file__, "--serve", str(bursts_file), "--tool-ms", str(tool_seconds * 1000)]
    if own:
        command.append("--own")
    process = await trio.lowlevel.open_process(command, stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None
        line = b""
        while not line.endswith(b"\n"):
            line += await process.stdout.receive_some(1)
        url = line.decode().split()[1]

        async def one_client() -> None:
            async with open_websocket_url(url) as ws:
                await ws.send_message(json.dumps({"type": "run", "messages": [{"role": "user", "content": "go"}]}))
                for _ in range(expected):
                    await ws.get_message()

        before = cpu_seconds(process.pid)
        async with trio.open_nursery() as nursery:
            for _ in range(clients):
                nursery.start_soon(one_client)
        return (cpu_seconds(process.pid) - before) * 1000 / clients
    finally:
        process.kill()
        await process.wait()


# --------------------------------------------------------------------------- the service, for comparison


async def service_cpu_per_run(clients: int, out: Path) -> float:
    """``ws_load.py --clients K`` once (one wave); its service CPU ms per run."""
    await trio.run_process(
        [sys.executable, str(HERE / "ws_load.py"), "--clients", str(clients), "--out", str(out)],
        stdout=subprocess.DEVNULL,
    )
    return float(json.loads(await trio.Path(out).read_text())["results"][0]["service_cpu_ms_per_run"])


async def main(args: argparse.Namespace) -> None:
    tool_seconds = args.tool_ms / 1000
    load_at_start = figures.load_average()
    bursts = await record_bursts(args.turns, tool_seconds)
    events = sum(len(burst) for burst in bursts)
    scratch = trio.Path(f"/tmp/floor-{os.getpid()}")
    await scratch.mkdir(exist_ok=True)
    bursts_file = scratch / "bursts.json"
    await bursts_file.write_text(json.dumps(bursts, ensure_ascii=False))
    samples: dict[str, list[float]] = {"mcp": [], "websocket": [], "own websocket": [], "service": []}
    for _ in range(args.repeat):
        samples["mcp"].append(await mcp_cpu_per_run(args.clients, args.turns, tool_seconds))
        samples["websocket"].append(await websocket_cpu_per_run(Path(bursts_file), events, args.clients, tool_seconds))
        samples["own websocket"].append(
            await websocket_cpu_per_run(Path(bursts_file), events, args.clients, tool_seconds, own=True)
        )
        if args.with_service:
            samples["service"].append(await service_cpu_per_run(args.clients, Path(scratch / "ws_load.json")))
    medians = {name: statistics.median(values) for name, values in samples.items() if values}
    floor = medians["mcp"] + medians["websocket"]
    print(
        f"{args.clients} runs at once, {args.turns} turns x {args.tool_ms:g} ms tool, {events} events in "
        f"{len(bursts)} bursts per run; CPU ms per run, medians of {args.repeat}"
    )
    named = {
        "mcp": "mcp (raw SDK, in-memory server)",
        "websocket": "websocket (plain trio-websocket)",
        "own websocket": "own websocket (ServerWebSocket)",
        "service": "service (ws_load, same sitting)",
    }
    table = {named[name]: (medians[name], samples[name]) for name in ("mcp", "websocket")}
    table["floor (their sum)"] = (floor, None)
    table |= {named[name]: (medians[name], samples[name]) for name in ("own websocket", "service") if name in medians}
    figures.print_medians("part", "cpu ms/run", table)
    if "service" in medians:
        service = medians["service"]
        print(
            f"the service spends {service - floor:.2f} ms per run above the floor ({service / floor:.2f} x the floor)"
        )
    report = {
        "machine": figures.machine(load_at_start),
        "clients": args.clients,
        "turns": args.turns,
        "tool_ms": args.tool_ms,
        "events_per_run": events,
        "samples_cpu_ms_per_run": {name: [round(v, 3) for v in values] for name, values in samples.items()},
        "median_cpu_ms_per_run": {name: round(v, 3) for name, v in medians.items()},
        "floor_cpu_ms_per_run": round(floor, 3),
    }
    figures.write(args.out, report)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, default=200, help="runs (connections) at once")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--tool-ms", type=float, default=50.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--with-service", action="store_true", help="run ws_load once per repeat, for comparison")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the JSON figures go")
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--own", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve = serve_bursts_own if args.own else serve_bursts
        trio.run(serve, json.loads(args.serve.read_text()), args.tool_ms / 1000)
    else:
        trio.run(main, args)
