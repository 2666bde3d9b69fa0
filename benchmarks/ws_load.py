"""How does the websocket service hold up under K concurrent clients, and what CPU does a run cost it?

The service runs as its own process (``--serve``, so its peak RSS and its CPU time are its own): an assistant
whose model (an instant ``FunctionModel`` in its non-streaming mode, so the figures are the runtime's, not the
double's) calls the test server's ``sleep`` tool (50 ms) once per turn for 3 turns, then answers; the test
server runs in process (``memory``) or as a stdio subprocess (``stdio``, whose own CPU is not counted). K
clients, each on its own websocket over loopback, start one run at once and read it to its terminal event.

The table shows, per wave: completed runs, errors, run latency percentiles against the ideal (turns × tool
latency), runs per second over the whole wave, the events a run sends its client, the **service's CPU
milliseconds per run** (user + system time of the service process over the wave, from ``/proc/<pid>/stat``,
divided by the runs completed: a figure a busy machine disturbs far less than latency or runs/s; ``of it sys``
is the kernel's share, mostly socket writes), and the service's peak RSS (``VmHWM``). With ``--repeat`` each
client count runs that many waves, each against a fresh service, and the table shows their medians.

    python benchmarks/ws_load.py [--clients 200 1000] [--repeat 3] [--turns 3] [--tool-ms 50] [--transport memory]
    python benchmarks/ws_load.py --clients 200 --profile service.prof   # cProfile of the service over the wave
    python benchmarks/ws_load.py --workers 1 2 [--clients 200] [--repeat 3]  # scale-out, threads in Redis
    python benchmarks/ws_load.py --front-end-only [--clients 200]  # the websocket front end's own CPU per run
    python benchmarks/ws_load.py --counts [--clients 200]  # also tasks, task steps, scheduler batches per run
    python benchmarks/ws_load.py --stores memory sqlite redis [--repeat 3]  # the stores side by side

With ``--workers``, each wave runs that many service processes listening on one port through ``SO_REUSEPORT`` (as
``yao-actors serve --workers N`` does), all keeping their threads in one Redis (a ``redis-server`` the benchmark
starts on a free loopback port), so every worker count is measured with the same store; CPU and RSS are summed
over the workers, and the last line gives the runs/s of each count against one worker's.

With ``--stores`` each wave runs once per store, the stores' waves interleaved (memory, SQLite, Redis, memory, ...),
SQLite in a fresh file per wave and Redis in one ``redis-server`` the benchmark starts; the table gains the store's
column, a line gives each store's CPU per run against the memory store's, and for Redis the commands the service
sent per run and how many of them were scripts called, one round trip each (``INFO commandstats`` before and after
the wave).

With ``--front-end-only`` the service records one real run's events at its start and every run replays them
through the front end (the tool's latency after each ``TOOL_CALL_END``): the CPU per run is then what the
websocket front end costs (handshake, frame parsing, writing the events, closing), without the runtime.

With ``--profile FILE`` the service runs cProfile over the wave alone (not its start-up or shut-down) and the
benchmark prints the last wave's CPU per run split by layer (``profile_layers.py``: the runtime's own code, Trio,
the MCP SDK, JSON, logging, the websocket library, socket calls).

With ``--counts`` the service counts, through a Trio instrument, the tasks it starts, the steps its tasks take and
its scheduler batches (I/O waits), and the table gives each per run over the wave: figures no load changes, so
they compare across machines and sittings where CPU milliseconds do not (the instrument's own cost, under 1 %, is
in that wave's CPU).

Writes ``benchmarks/results/ws_load.json`` (``--out``) with the machine's load average before the first wave.
A benchmark, not a test: it asserts nothing. Loopback only.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import coredis
import figures
import profile_layers
import trio

from yao_actors.cli.chat import open_service_connection
from yao_actors.cli.workers import reserve_port, reuse_port_listener
from yao_actors.config import (
    AssistantSpec,
    Config,
    InMemoryTransport,
    ServerRef,
    ServerSpec,
    ServiceSpec,
    StdioTransport,
)
from yao_actors.conversation import RunRequest
from yao_actors.models.base import Completion, ToolCall
from yao_actors.observability.logs import configure_logging
from yao_actors.runtime import open_runtime
from yao_actors.service import serve_service
from yao_actors.service.heap import keep_heap
from yao_actors.specs import StoreSpec
from yao_actors.testing import FunctionModel
from yao_actors.testing.redis_server import REDIS_SERVER, RedisServer
from yao_actors.testing.servers import build_test_server

RESULTS = Path(__file__).parent / "results" / "ws_load.json"
SERVICE_LOG = Path(tempfile.gettempdir()) / "ws_load-service.log"
"""Where the service processes' standard error goes (their log records), appended to."""


@contextlib.contextmanager
def open_redis(wanted: bool) -> Iterator[str | None]:
    """A ``redis-server`` on a free loopback port (no persistence) for the waves, stopped at the end."""
    if not wanted:
        yield None
        return
    if REDIS_SERVER is None:
        raise SystemExit("--workers and the redis store need redis-server (Debian: apt-get install redis-server)")
    with tempfile.TemporaryDirectory(prefix="ws-load-redis-") as folder:
        server = RedisServer(Path(folder), append_only=False)
        server.start()
        try:
            yield server.url
        finally:
            server.stop()


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

    return FunctionModel(answer, stream=False)


def service_config(
    turns: int, tool_seconds: float, transport: str, redis_url: str | None = None, sqlite_path: Path | None = None
) -> Config:
    """The benchmark service's config (the test server in process or over stdio, the assistant, loopback, limits
    above any wave): :func:`serve`'s, and ``asgi_load.py``'s ASGI process's."""
    server_transport = (
        InMemoryTransport(build_test_server("s1"))
        if transport == "memory"
        else StdioTransport(sys.executable, ("-m", "yao_actors.testing.servers", "--name", "s1"))
    )
    return Config(
        servers={"s1": ServerSpec("s1", server_transport, max_concurrency=MAX_CLIENTS, queue_size=MAX_CLIENTS)},
        assistants={"default": AssistantSpec(id="default", model="m", servers=(ServerRef("s1"),), max_turn=turns + 2)},
        store=_store(redis_url, sqlite_path),
        service=ServiceSpec(host="127.0.0.1", port=0, max_connections=MAX_CLIENTS, max_runs=MAX_CLIENTS),
    )


class SchedulerCounts(trio.abc.Instrument):
    """Counts the service's tasks started, task steps and scheduler batches (``--counts``)."""

    def __init__(self) -> None:
        self.counts = {"tasks": 0, "steps": 0, "batches": 0}

    def task_spawned(self, task: trio.lowlevel.Task) -> None:
        self.counts["tasks"] += 1

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.counts["steps"] += 1

    def after_io_wait(self, timeout: float) -> None:
        self.counts["batches"] += 1


async def serve(
    turns: int,
    tool_seconds: float,
    transport: str,
    port: int = 0,
    redis_url: str | None = None,
    front_end_only: bool = False,
    counts: bool = False,
    profile: Path | None = None,
    sqlite_path: Path | None = None,
) -> None:
    """Serve on ``port`` (0: a free one; else shared with other workers through ``SO_REUSEPORT``) on loopback,
    with threads in Redis at ``redis_url`` or SQLite at ``sqlite_path`` if given (else in memory); print ``LISTENING <url>``, stop on SIGTERM.

    ``front_end_only``: the runs are :class:`ReplayedRuns` of one real run's events (recorded here first), so
    the service's CPU is the websocket front end's alone. ``counts``: print ``COUNTS <json>`` (tasks, steps,
    batches so far: :class:`SchedulerCounts`) on each SIGUSR1. ``profile``: a cProfile of the service between the
    first SIGUSR1 and the second (the wave, without start-up and shut-down), written to that file. As ``yao-actors
    serve`` does, it freezes its start-up out of the garbage collector's passes (:func:`keep_heap`) and logs INFO
    text (two records per run), to standard error, which the benchmark sends to ``SERVICE_LOG``."""
    configure_logging("INFO")
    config = service_config(turns, tool_seconds, transport, redis_url, sqlite_path)
    spec = attrs.evolve(config.service, port=port)
    listeners = [reuse_port_listener("127.0.0.1", port)] if port else None
    counter = SchedulerCounts()
    if counts:
        trio.lowlevel.add_instrument(counter)
    profiler = cProfile.Profile() if profile is not None else None
    marks = 0
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGUSR1) as signals:
        async with (
            open_runtime(config, models={"m": _model(turns, tool_seconds)}) as runtime,
            trio.open_nursery() as nursery,
        ):
            runs: Any = runtime
            if front_end_only:
                recorded = await runtime.run("default", "go")
                runs = ReplayedRuns(tuple(dict(event) for event in recorded.events), tool_seconds)
            service = await nursery.start(partial(serve_service, runs, spec, listeners=listeners))
            await nursery.start(keep_heap)  # as `yao-actors serve` does
            print(f"LISTENING {service.url}", flush=True)
            async for signum in signals:
                if signum != signal.SIGUSR1:
                    break
                marks += 1
                if profiler is not None and marks == 1:
                    profiler.enable()
                elif profiler is not None and marks == 2:
                    profiler.disable()
                    profiler.dump_stats(profile)
                print(f"COUNTS {json.dumps(counter.counts)}", flush=True)
            nursery.cancel_scope.cancel()


def _store(redis_url: str | None, sqlite_path: Path | None) -> StoreSpec | None:
    if redis_url is not None:
        return StoreSpec("redis", url=redis_url, prefix="ws-load:")
    if sqlite_path is not None:
        return StoreSpec.sqlite(sqlite_path)
    return None


class ReplayedRuns:
    """A runtime double for ``--front-end-only``: each run's stream gives the recorded events of one real run,
    under the request's run id, waiting the tool's latency after each ``TOOL_CALL_END`` as the real run did."""

    def __init__(self, events: tuple[dict[str, Any], ...], tool_seconds: float) -> None:
        self.events = events
        self.tool_seconds = tool_seconds
        self.servers: dict[str, Any] = {}

    @property
    def authorizations(self) -> None:
        return None  # no server behind OAuth per principal

    def store_problem(self) -> str | None:
        return None

    async def tools_not_offered(self) -> dict[str, dict[str, str]]:
        await trio.lowlevel.checkpoint()
        return {}

    @contextlib.asynccontextmanager
    async def open_run(self, request: RunRequest, /) -> Any:
        yield _ReplayedStream(self.events, request.run_id, self.tool_seconds)


class _ReplayedStream:
    """The stream of a replayed run: the recorded events, a pause after each ``TOOL_CALL_END``."""

    def __init__(self, events: tuple[dict[str, Any], ...], run_id: str, tool_seconds: float) -> None:
        self._events = events
        self._run_id = run_id
        self._tool_seconds = tool_seconds
        self._next = 0
        self._paused = False

    def cancel(self) -> None:
        pass

    def detach(self) -> None:
        pass

    async def wait_done(self) -> None:
        await trio.lowlevel.checkpoint()

    def receive_nowait(self) -> dict[str, Any]:
        if self._paused:
            raise trio.WouldBlock
        if self._next >= len(self._events):
            raise trio.EndOfChannel
        event = {**self._events[self._next], "runId": self._run_id}
        self._next += 1
        self._paused = event["type"] == "TOOL_CALL_END"
        return event

    async def receive(self) -> dict[str, Any]:
        if self._paused:
            await trio.sleep(self._tool_seconds)
            self._paused = False
        else:
            await trio.lowlevel.checkpoint()
        return self.receive_nowait()

    def __aiter__(self) -> _ReplayedStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None


# --------------------------------------------------------------------------- the clients


@attrs.define
class Tally:
    """What the clients of one wave saw: each completed run's latency, the errors, the events received."""

    latencies: list[float] = attrs.field(factory=list)
    errors: list[str] = attrs.field(factory=list)
    events: int = 0
    wave: str = attrs.field(factory=lambda: uuid.uuid4().hex[:8])


async def one_client(url: str, index: int, tally: Tally) -> None:
    """Run one conversation on its own connection; record its latency or its error, and its events."""
    run_id = f"load-{tally.wave}-{index}"  # unique in a store shared by several waves
    frame = {"type": "run", "runId": run_id, "messages": [{"role": "user", "content": "go"}]}
    try:
        async with open_service_connection(url) as ws:
            started = time.perf_counter()
            await ws.send_message(json.dumps(frame))
            while True:
                event = json.loads(await ws.get_message())
                tally.events += 1
                if event.get("runId") == run_id and event["type"] in ("RUN_FINISHED", "RUN_ERROR"):
                    break
            if event["type"] == "RUN_ERROR":
                tally.errors.append(str(event.get("code")))
            else:
                tally.latencies.append(time.perf_counter() - started)
    except Exception as error:  # a benchmark counts failures instead of stopping at the first
        tally.errors.append(type(error).__name__)


def peak_rss_mib(pid: int) -> float:
    """The peak resident set size of process ``pid`` (``VmHWM``), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def read_line(process: trio.Process) -> str:
    """The next line the service process prints."""
    assert process.stdout is not None
    line = b""
    while not line.endswith(b"\n"):
        chunk = await process.stdout.receive_some(1)
        if not chunk:
            raise EOFError(f"the service process ended (its log: {SERVICE_LOG})")
        line += chunk
    return line.decode()


async def scheduler_counts(processes: list[trio.Process]) -> dict[str, int]:
    """The services' :class:`SchedulerCounts` so far, summed (each prints them on SIGUSR1)."""
    total = {"tasks": 0, "steps": 0, "batches": 0}
    for process in processes:
        process.send_signal(signal.SIGUSR1)
        counts = json.loads((await read_line(process)).removeprefix("COUNTS "))
        for key in total:
            total[key] += counts[key]
    return total


def cpu_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU seconds process ``pid`` has used so far (its own threads; not its children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


async def wave(
    clients: int,
    turns: int,
    tool_ms: float,
    transport: str,
    profile: Path | None,
    workers: int | None = None,
    redis_url: str | None = None,
    front_end_only: bool = False,
    counts: bool = False,
    store: str = "memory",
    serve_command: list[str] | None = None,
) -> dict[str, Any]:
    """Start a fresh service (``workers`` processes on one port, threads in Redis, when given; else one, its
    threads in ``store``), run ``clients`` conversations at once against it, and measure. ``serve_command``
    starts another service process instead of this script's ``--serve`` (it prints ``LISTENING <url>`` once it
    serves, and stops on SIGTERM)."""
    command = [sys.executable, __file__, "--serve", "--turns", str(turns), "--tool-ms", str(tool_ms)]
    command += ["--transport", transport]
    if front_end_only:
        command.append("--front-end-only")
    if counts:
        command.append("--counts")
    if profile is not None:
        command += ["--profile", str(profile)]
    if serve_command is not None:
        command = serve_command
    reserved = None
    if workers is not None:
        assert redis_url is not None
        reserved = reserve_port("127.0.0.1", 0)
        command += ["--port", str(reserved.getsockname()[1]), "--redis-url", redis_url]
    elif store == "redis":
        assert redis_url is not None
        command += ["--redis-url", redis_url]
    folder = tempfile.TemporaryDirectory(prefix="ws-load-sqlite-")
    if store == "sqlite":
        command += ["--sqlite-path", str(Path(folder.name) / "conversations.sqlite3")]
    log = open(SERVICE_LOG, "ab")  # noqa: SIM115, ASYNC230 (the services keep it open)
    processes = [
        await trio.lowlevel.open_process(command, stdout=subprocess.PIPE, stderr=log) for _ in range(workers or 1)
    ]
    log.close()
    try:
        for process in processes:
            url = (await read_line(process)).split()[1]
        marked = counts or profile is not None  # SIGUSR1 before and after: counts, and the profile's span
        counted_before = await scheduler_counts(processes) if marked else {}
        tally = Tally()
        commands_before = await redis_commands(redis_url) if store == "redis" or workers else (0, 0)
        cpu_before = [cpu_seconds(p.pid) for p in processes]
        clients_before = time.process_time()
        started = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for index in range(clients):
                nursery.start_soon(one_client, url, index, tally)
        elapsed = time.perf_counter() - started
        clients_cpu = time.process_time() - clients_before
        spent = [cpu_seconds(p.pid) for p in processes]
        user = sum(u for u, _ in spent) - sum(u for u, _ in cpu_before)
        system = sum(s for _, s in spent) - sum(s for _, s in cpu_before)
        cpu = user + system
        rss = sum(peak_rss_mib(p.pid) for p in processes)
        after = await redis_commands(redis_url) if store == "redis" or workers else (0, 0)
        commands, scripts = after[0] - commands_before[0], after[1] - commands_before[1]
        counted = await scheduler_counts(processes) if marked else {}
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            with trio.move_on_after(30):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
        if reserved is not None:
            reserved.close()
        folder.cleanup()
    latencies = tally.latencies
    cuts = statistics.quantiles(latencies, n=100) if len(latencies) >= 2 else [float("nan")] * 99
    runs = len(latencies) + len(tally.errors)
    return {
        "clients": clients,
        "workers": workers or 1,
        "store": "redis" if workers else store,
        "completed": len(latencies),
        "errors": len(tally.errors),
        "error_kinds": sorted(set(tally.errors)),
        "ideal_ms": turns * tool_ms,
        "p50_ms": cuts[49] * 1000,
        "p95_ms": cuts[94] * 1000,
        "p99_ms": cuts[98] * 1000,
        "runs_per_s": len(latencies) / elapsed,
        "events_per_run": tally.events / runs if runs else float("nan"),
        "service_cpu_s": cpu,
        "service_cpu_ms_per_run": cpu * 1000 / len(latencies) if latencies else float("nan"),
        "service_sys_ms_per_run": system * 1000 / len(latencies) if latencies else float("nan"),
        "service_peak_rss_mib": rss,
        "clients_cpu_ms_per_run": clients_cpu * 1000 / len(latencies) if latencies else float("nan"),
        # INFO's own call is among the commands counted after: one less.
        "redis_commands_per_run": (commands - 1) / runs if commands and runs else 0.0,
        "redis_scripts_per_run": scripts / runs if runs else 0.0,
    } | {
        f"{key}_per_run": (counted[key] - counted_before[key]) / len(latencies) if latencies else float("nan")
        for key in (counted if counts else ())
    }


async def redis_commands(url: str | None) -> tuple[int, int]:
    """How many commands the Redis at ``url`` has run since it started, and how many of them were scripts called
    (``EVALSHA``, ``EVAL``: one round trip each, whatever runs inside) (``INFO commandstats``)."""
    assert url is not None
    client = coredis.Redis.from_url(url, decode_responses=True)
    async with client:
        stats = await client.info("commandstats")
    calls = {key: int(value["calls"]) for key, value in stats.items() if key.startswith("cmdstat_")}
    return sum(calls.values()), calls.get("cmdstat_evalsha", 0) + calls.get("cmdstat_eval", 0)


def median_row(waves: list[dict[str, Any]]) -> dict[str, Any]:
    """One row for the waves of one client count: the median of each figure, and every wave's CPU per run."""
    row: dict[str, Any] = {
        "clients": waves[0]["clients"],
        "workers": waves[0]["workers"],
        "store": waves[0]["store"],
        "waves": len(waves),
    }
    for key, value in waves[0].items():
        if key == "error_kinds":
            row[key] = sorted({kind for w in waves for kind in w[key]})
        elif key not in row:
            row[key] = statistics.median(w[key] for w in waves) if isinstance(value, int | float) else value
    row["service_cpu_ms_per_run_waves"] = [round(w["service_cpu_ms_per_run"], 2) for w in waves]
    row["runs_per_s_waves"] = [round(w["runs_per_s"], 1) for w in waves]
    return row


def print_table(rows: list[dict[str, Any]]) -> None:
    head = (
        f"{'store':>6} {'workers':>7} {'clients':>8} {'waves':>5} {'done':>6} {'errors':>6} {'ideal':>7} {'p50':>8} {'p95':>8} "
        f"{'p99':>8} {'runs/s':>8} {'events/run':>10} {'cpu ms/run':>10} {'of it sys':>9} {'RSS MiB':>8}"
    )
    print(head)
    for r in rows:
        print(
            f"{r['store']:>6} {r['workers']:>7} {r['clients']:>8} {r['waves']:>5} {r['completed']:>6.0f} {r['errors']:>6.0f} {r['ideal_ms']:>5.0f}ms "
            f"{r['p50_ms']:>6.0f}ms {r['p95_ms']:>6.0f}ms {r['p99_ms']:>6.0f}ms {r['runs_per_s']:>8.1f} "
            f"{r['events_per_run']:>10.1f} {r['service_cpu_ms_per_run']:>10.2f} {r['service_sys_ms_per_run']:>9.2f} "
            f"{r['service_peak_rss_mib']:>8.1f}"
        )
    counted = [r for r in rows if "steps_per_run" in r]
    for r in counted:
        print(
            f"{r['clients']} clients, {r['workers']} worker(s), per run: {r['tasks_per_run']:.1f} tasks started, "
            f"{r['steps_per_run']:.1f} task steps, {r['batches_per_run']:.1f} scheduler batches"
        )


def print_store_ratios(rows: list[dict[str, Any]]) -> None:
    """Each store's service CPU per run against the memory store's (same clients and workers), and Redis' commands."""
    for row in rows:
        memory = next(
            (
                r
                for r in rows
                if r["store"] == "memory" and (r["clients"], r["workers"]) == (row["clients"], row["workers"])
            ),
            None,
        )
        if row["store"] == "memory" or memory is None:
            continue
        line = (
            f"{row['clients']} clients, {row['store']}: CPU per run ×{row['service_cpu_ms_per_run'] / memory['service_cpu_ms_per_run']:.2f}"
            f" the memory store's"
        )
        if row["store"] == "redis":
            line += (
                f"; {row['redis_commands_per_run']:.1f} Redis commands per run,"
                f" {row.get('redis_scripts_per_run', 0.0):.1f} of them scripts called (EVALSHA)"
            )
        print(line)


async def main(args: argparse.Namespace) -> None:
    load = figures.load_average()
    rows = []
    kinds = [(workers, store) for workers in args.workers or [None] for store in args.stores]
    with open_redis(args.workers is not None or "redis" in args.stores) as redis_url:
        for clients in args.clients:
            for workers, store in kinds:
                # With several worker counts or stores the waves interleave (1, 2, 1, 2, ...): a machine whose
                # load changes during the run disturbs every one alike.
                rows.append({"clients": clients, "workers": workers, "store": store, "waves": []})
            for _ in range(args.repeat):
                for row in rows[-len(kinds) :]:
                    row["waves"].append(
                        await wave(
                            min(clients, MAX_CLIENTS),
                            args.turns,
                            args.tool_ms,
                            args.transport,
                            args.profile,
                            row["workers"],
                            redis_url,
                            args.front_end_only,
                            args.counts,
                            row["store"],
                        )
                    )
    last_wave = rows[-1]["waves"][-1]
    rows = [median_row(row["waves"]) for row in rows]
    store = ", threads in Redis, workers on one SO_REUSEPORT port" if args.workers else ""
    if not args.workers and args.stores != ["memory"]:
        store = f", threads in {' / '.join(args.stores)}"
    if args.front_end_only:
        store += ", FRONT END ONLY (the runs replay one real run's events)"
    print(
        f"{args.turns} turns × {args.tool_ms:.0f} ms tool per run, test server {args.transport}, one run per "
        f"connection{store}"
    )
    print_table(rows)
    clients_cpu = ", ".join(f"{r['clients_cpu_ms_per_run']:.1f}" for r in rows)
    print(f"the clients' own CPU ms per run (this process, the load generator), by row: {clients_cpu}")
    print(f"the service processes' log records (INFO, as yao-actors serve logs): {SERVICE_LOG}")
    if args.profile is not None:
        runs = last_wave["completed"] + last_wave["errors"]
        print(f"\nthe last wave's service time by layer (cProfile, {args.profile}; profile_layers.py):")
        profile_layers.main([str(args.profile), "--runs", str(max(runs, 1))])
    if len(args.stores) > 1:
        print_store_ratios(rows)
    if args.workers:
        for clients in args.clients:
            same = [r for r in rows if r["clients"] == clients]
            one = same[0]["runs_per_s"]
            ratios = ", ".join(f"{r['workers']} workers ×{r['runs_per_s'] / one:.2f}" for r in same[1:])
            print(f"{clients} clients: runs/s against {same[0]['workers']} worker(s): {ratios}")
    report = {
        "benchmark": "ws_load",
        "machine": figures.machine(load),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "model": "FunctionModel(stream=False)",
        "turns": args.turns,
        "tool_ms": args.tool_ms,
        "transport": args.transport,
        "stores": ["redis"] if args.workers else args.stores,
        "front_end_only": args.front_end_only,
        "profiled": args.profile is not None,  # cProfile slows the service: its CPU figures are not comparable
        "results": rows,
    }
    figures.write(args.out, report)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, nargs="+", default=[200], help="concurrent clients per wave")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--tool-ms", type=float, default=50.0)
    parser.add_argument("--transport", choices=["memory", "stdio"], default="memory")
    parser.add_argument("--repeat", type=int, default=1, help="waves per client count, each on a fresh service")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the service process to this file")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the JSON figures go")
    parser.add_argument(
        "--workers", type=int, nargs="+", help="worker counts to compare (SO_REUSEPORT, threads in Redis)"
    )
    parser.add_argument(
        "--front-end-only",
        action="store_true",
        help="runs replay one real run's events (recorded at the start): the service's CPU is the front end's",
    )
    parser.add_argument(
        "--counts", action="store_true", help="also count the service's tasks, task steps and scheduler batches"
    )
    parser.add_argument(
        "--stores",
        nargs="+",
        choices=["memory", "sqlite", "redis"],
        default=["memory"],
        help="the stores to compare, one service each, waves interleaved (default: memory)",
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--sqlite-path", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--redis-url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.profile is not None and args.workers is not None:
        parser.error("--profile profiles one service process: it does not go with --workers")
    if args.workers is not None and args.stores != ["memory"]:
        parser.error("--workers keeps the threads in Redis: it does not go with --stores")
    if args.workers is not None and args.out == RESULTS:
        args.out = RESULTS.with_name("ws_load_workers.json")
    serving = partial(
        serve,
        args.turns,
        args.tool_ms / 1000,
        args.transport,
        args.port,
        args.redis_url,
        args.front_end_only,
        args.counts,
        args.profile,
        args.sqlite_path,
    )
    if args.serve:
        trio.run(serving)
    else:
        trio.run(main, args)
