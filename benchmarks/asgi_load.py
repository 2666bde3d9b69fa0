"""What does the ASGI application under uvicorn cost against ``yao-actors serve``, on ``ws_load``'s workload?

Two kinds of service process, each fresh for every wave, on the same config (``ws_load.service_config``: an
instant ``FunctionModel`` calling the in-process test server's 50 ms ``sleep`` once per turn for 3 turns) and the
same clients (``ws_load.wave``: K websockets on loopback, one run each, read to the terminal event):

- ``serve``: ``ws_load``'s own service process (the Trio service, as ``yao-actors serve`` runs it: its logging and
  its garbage-collector policy, ``keep_heap``);
- ``asgi``: ``yao_actors.asgi.app`` under uvicorn (its asyncio loop, websockets on ``wsproto``, no access log),
  the Trio runtime and service a guest of uvicorn's loop; the same INFO logging of ``yao_actors``, and no
  ``keep_heap`` (the GC policy stays with ``serve``);
- ``asgi_5ms``: the same with the GIL's switch interval left at Python's 5 ms (``switch_interval=None``), where
  ``asgi`` has the guest run's 1 ms (``yao_actors.aio.guest.GUEST_SWITCH_INTERVAL``).

The waves interleave (the kinds' order turning each repetition) in one sitting; the table gives each kind's
medians in that order, and the last lines the ratios ÷ serve of the service's CPU per run and of runs/s. A benchmark, not a test: it asserts
nothing. Writes ``benchmarks/results/asgi_load.json`` (``--out``).

    python benchmarks/asgi_load.py [--clients 200] [--repeat 3] [--turns 3] [--tool-ms 50]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
import time
from pathlib import Path
from typing import Any

import figures
import trio
import uvicorn
import ws_load

import yao_actors.asgi
from yao_actors.aio.guest import GUEST_SWITCH_INTERVAL
from yao_actors.observability.logs import configure_logging

RESULTS = Path(__file__).parent / "results" / "asgi_load.json"


def serve_asgi(turns: int, tool_seconds: float, switch_interval: float | None) -> None:
    """The ASGI process: uvicorn on a free loopback port; prints ``LISTENING <url>`` once started, stops on SIGTERM."""
    configure_logging("INFO")
    config = ws_load.service_config(turns, tool_seconds, "memory")
    model = ws_load._model(turns, tool_seconds)
    application = yao_actors.asgi.app(config, models={"m": model}, switch_interval=switch_interval)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            application, ws="wsproto", lifespan="on", log_config=None, access_log=False, backlog=ws_load.MAX_CLIENTS
        )
    )

    async def main() -> None:
        serving = asyncio.create_task(server.serve(sockets=[listener]))
        while not server.started and not serving.done():  # noqa: ASYNC110 - uvicorn offers no event
            await asyncio.sleep(0.01)
        print(f"LISTENING ws://127.0.0.1:{port}/", flush=True)
        await serving

    asyncio.run(main())


async def main(args: argparse.Namespace) -> None:
    load = figures.load_average()
    asgi_command = [
        sys.executable,
        __file__,
        "--serve-asgi",
        "--turns",
        str(args.turns),
        "--tool-ms",
        str(args.tool_ms),
    ]
    commands = {"serve": None, "asgi": asgi_command, "asgi_5ms": [*asgi_command, "--python-switch-interval"]}
    waves: dict[str, list[dict[str, Any]]] = {kind: [] for kind in commands}
    kinds = list(commands)
    for repetition in range(args.repeat):
        for kind in kinds[repetition % 3 :] + kinds[: repetition % 3]:
            command = commands[kind]
            waves[kind].append(
                await ws_load.wave(args.clients, args.turns, args.tool_ms, "memory", None, serve_command=command)
            )
    rows = {kind: ws_load.median_row(found) for kind, found in waves.items()}
    print(f"{args.turns} turns × {args.tool_ms:.0f} ms tool per run, in-memory test server, one run per connection")
    for figure, key in (("cpu ms/run", "service_cpu_ms_per_run"), ("runs/s", "runs_per_s")):
        figures.print_medians("kind", figure, {kind: (row[key], row[f"{key}_waves"]) for kind, row in rows.items()})
    ws_load.print_table(list(rows.values()))
    ratios = {}
    for kind in kinds[1:]:
        cpu_ratio = rows[kind]["service_cpu_ms_per_run"] / rows["serve"]["service_cpu_ms_per_run"]
        rate_ratio = rows[kind]["runs_per_s"] / rows["serve"]["runs_per_s"]
        ratios[kind] = {"cpu_ms_per_run": cpu_ratio, "runs_per_s": rate_ratio}
        print(f"{kind} ÷ serve: CPU per run ×{cpu_ratio:.2f}, runs/s ×{rate_ratio:.2f}")
    report = {
        "benchmark": "asgi_load",
        "machine": figures.machine(load),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "uvicorn": uvicorn.__version__,
        "turns": args.turns,
        "tool_ms": args.tool_ms,
        "clients": args.clients,
        "results": rows,
        "over_serve": ratios,
    }
    figures.write(args.out, report)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, default=200, help="concurrent clients per wave")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--tool-ms", type=float, default=50.0)
    parser.add_argument("--repeat", type=int, default=3, help="waves of each kind, interleaved")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the JSON figures go")
    parser.add_argument("--serve-asgi", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--python-switch-interval", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_asgi:
        serve_asgi(args.turns, args.tool_ms / 1000, None if args.python_switch_interval else GUEST_SWITCH_INTERVAL)
    else:
        trio.run(main, args)
