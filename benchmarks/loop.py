"""Benchmark: what the conversation loop costs per turn, against the same tool calls with the plain ``mcp`` client.

Two workloads, each over the test server as real stdio subprocesses:

- ``echo``: a 20-turn run (``--turns``) whose instant ``FunctionModel`` asks for
  one ``echo`` call per turn on one server, then answers. The model runs in its
  non-streaming mode (``stream=False``): the run announces its calls itself, as
  for any model that does not stream, so the figures are the runtime's and not
  the test double's. The ``raw`` row sends
  the same 20 calls one after another with a plain ``mcp.Client``, no loop; the
  ``handle`` row sends them through the runtime's server handle, which separates
  the server actor's cost from the loop's own (model calls, events, history,
  dispatch). ``loop`` is ``Runtime.run``, which keeps the events and returns
  them at the end; ``stream`` is the same run through ``Runtime.open_run`` with
  a task reading every event as it comes (what a streaming front end adds: a
  trip through the scheduler per event). ``traced`` is ``loop`` with tracing
  on: the OpenTelemetry SDK installed with an in-memory exporter, every span
  of the run recorded (``invoke_agent``, ``chat``, ``execute_tool``, and the
  MCP SDK's own client span per call); the other rows run with no tracer
  provider, as a service does without the ``otel`` extra. This workload
  measures overhead: its tool costs almost nothing. What observability costs a
  turn with tracing off (the span and metric calls of one model call and one
  tool call, timed alone in this process) is printed after the table, as a
  share of the loop's CPU per turn. ``sqlite`` and ``redis`` are ``loop`` with
  the thread kept in a SQLite file and in a Redis server of the benchmark's
  own (``loop`` keeps it in the memory store, the library's default); what
  each adds per turn is printed after the table (targets: ≤ 20% and ≤ 30%).
- ``sleep``: 4 servers × 3 turns (``--servers``, ``--sleep-turns``), each turn one
  100 ms ``sleep`` call on every server (``--latency-ms``), all at once. The
  ``raw`` row runs each turn's calls from a plain nursery over one ``mcp.Client``
  per server.
- ``batch``: 16 calls (``--batch-calls``) of 100 ms ``sleep`` in one model turn, spread round-robin over
  4 servers (``--servers``): a model that asks for a batch at once. The ``raw`` row starts the same 16
  calls at once from a plain nursery over one ``mcp.Client`` per server; the ratio says what the runtime
  adds to a batch's wall time (its start and its end: the calls overlap).

Every row speaks the protocol ``--protocol`` names (default ``auto``: the newest both sides speak, 2026-07-28
with the test server): the runtime's servers and the raw clients alike. The generations do not cost the same: a
2026-07-28 call carries its client's info and capabilities in ``_meta`` and costs the SDK (both sides) about
0.15-0.3 ms more per call on this machine than a ``legacy`` one, so a ``raw`` row on another generation than
the runtime's would charge that to the runtime.

Each run is a new thread, so no run carries the history of the one before.
Rows run interleaved, repetition by repetition (``--repeat``), after a warm-up
each, so machine noise hits them alike. The table shows the median wall time,
the median per turn, the loop's overhead per turn over ``raw``, the ratio to
``raw`` (the target: the loop costs at most 1.3 × raw per turn on ``echo``),
and the CPU time of this process per turn (what the loop itself burns; the
servers' CPU is not in it), which a busy machine disturbs less than wall time.
Figures go to ``benchmarks/results/loop.json``. This measures; it asserts
nothing. With ``--profile FILE``, the first workload's ``loop`` row runs
``--repeat`` more times under cProfile after the timed rounds, and its time is
printed per turn split by layer (``profile_layers.py``: the runtime's own
code, Trio, the MCP SDK, JSON).

Run from the repository root: ``python benchmarks/loop.py``.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import figures
import mcp
import mcp.shared._otel
import profile_layers
import trio
from mcp.client.stdio import StdioServerParameters
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from yao_actors.config import AssistantSpec, Config, ServerRef
from yao_actors.conversation import ConversationManager, RunResult, open_conversations
from yao_actors.events import Outcome
from yao_actors.models import Completion, FunctionModel, ToolCall
from yao_actors.observability import tracing
from yao_actors.observability.metrics import TOOL_CALLS, TOOL_DURATION, labelled
from yao_actors.observability.runs import ModelCallObservation
from yao_actors.runtime import Runtime, open_runtime
from yao_actors.specs import StoreSpec, protocol_choices
from yao_actors.store import open_store
from yao_actors.testing import TEST_SERVER_COMMAND, stdio_test_server
from yao_actors.testing.redis_server import REDIS_SERVER, RedisServer
from yao_actors.transports import connect_mode

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "loop.json"
TARGET_RATIO = 1.3

Job = Callable[[], Awaitable[None]]
"""Runs one workload once."""


@attrs.frozen
class Workload:
    """One workload: its tool calls per turn, on which servers, with which arguments."""

    name: str
    servers: int
    turns: int
    tool: str
    arguments: dict[str, Any]
    per_server: int = 1
    """Calls on each server in one turn (``batch``: several; the others: one)."""

    @property
    def calls_per_turn(self) -> int:
        return self.servers * self.per_server


@attrs.define(eq=False)
class Setup:
    """A workload, ready: the runtime (server actors, the model), one plain ``mcp`` client per server, and
    conversations over the same server actors keeping their threads in SQLite and in Redis (``stores``)."""

    workload: Workload
    runtime: Runtime
    raw_clients: list[mcp.Client]
    stores: dict[str, ConversationManager] = attrs.field(factory=dict)


async def open_durable_conversations(runtime: Runtime, stack: AsyncExitStack) -> dict[str, ConversationManager]:
    """The runtime's assistants, servers and models over a SQLite store (a temporary file) and, when
    ``redis-server`` is installed, a Redis store (a server of its own on a free loopback port)."""
    folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="yao-loop-")))
    specs = {"sqlite": StoreSpec.sqlite(folder / "conversations.sqlite3")}
    if REDIS_SERVER is not None:
        redis = RedisServer(folder, append_only=False)  # a server of the benchmark's own, stopped with the stack
        redis.start()
        stack.callback(redis.stop)
        specs["redis"] = StoreSpec("redis", url=redis.url, prefix="loop:")
    else:
        print("redis-server is not installed: no redis row", file=sys.stderr)
    managers = {}
    for name, spec in specs.items():
        store = await stack.enter_async_context(open_store(spec))
        config = runtime.config
        managers[name] = await stack.enter_async_context(
            open_conversations(config.assistants, runtime.servers, runtime.models, store=store)
        )
    return managers


def server_ids(count: int) -> list[str]:
    return [f"s{i}" for i in range(count)]


def scripted_model(workload: Workload) -> FunctionModel:
    """An instant model: every turn ``per_server`` calls per server, for ``turns`` turns, then a text answer."""
    arguments = json.dumps(workload.arguments)
    ids = server_ids(workload.servers)

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        if turn >= workload.turns:
            return Completion(text="done")
        calls = tuple(
            ToolCall(f"call_{turn}_{s}_{k}", f"{s}__{workload.tool}", arguments)
            for k in range(workload.per_server)
            for s in ids
        )
        return Completion(tool_calls=calls, finish_reason="tool_calls")

    return FunctionModel(script, name="scripted", stream=False)


@asynccontextmanager
async def open_setup(workload: Workload, protocol: str = "auto") -> AsyncIterator[Setup]:
    """Start the workload's stdio servers: actors through the runtime, and the raw clients, both speaking
    ``protocol`` (a server spec's ``protocol``: the same generation on both sides, or the comparison is unfair)."""
    ids = server_ids(workload.servers)
    assistant = AssistantSpec(
        "bench",
        "scripted",
        ("You are a benchmark.",),
        tuple(ServerRef(i) for i in ids),
        max_turn=workload.turns + 1,
        max_tools=100,
    )
    config = Config(servers={i: stdio_test_server(i, protocol=protocol) for i in ids}, assistants={"bench": assistant})
    command, *args = TEST_SERVER_COMMAND
    mode, _ = connect_mode(protocol, None)
    async with AsyncExitStack() as stack:
        runtime = await stack.enter_async_context(open_runtime(config, models={"scripted": scripted_model(workload)}))
        raw_clients = [
            await stack.enter_async_context(
                mcp.Client(StdioServerParameters(command=command, args=[*args, "--name", i]), mode=mode, cache=None)
            )
            for i in ids
        ]
        for client in raw_clients:
            await client.list_tools()  # as warm as the actors: no tools/list per call
        stores = await open_durable_conversations(runtime, stack)
        yield Setup(workload, runtime, raw_clients, stores)


@attrs.define(eq=False)
class Tracing:
    """Switches tracing on and off between rows, in one process.

    OpenTelemetry lets a process set its tracer provider once; a benchmark that interleaves rows with and
    without tracing resets the API's private global instead (and the MCP SDK's cached tracer), which no
    application should do.
    """

    exporter: InMemorySpanExporter = attrs.field(factory=InMemorySpanExporter)
    provider: TracerProvider = attrs.field(init=False)
    spans: int = 0

    def __attrs_post_init__(self) -> None:
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def switch(self, on: bool) -> None:
        trace._TRACER_PROVIDER = self.provider if on else None  # type: ignore[attr-defined]
        mcp.shared._otel._tracer = trace.get_tracer("mcp-python-sdk")
        self.spans = len(self.exporter.get_finished_spans()) or self.spans
        self.exporter.clear()


TRACING = Tracing()


def observability_off_cost(repeat: int = 20000) -> float:
    """Seconds the observability of one turn costs with tracing off: what ``Run.call_model`` and ``dispatch``
    call around one model call and one tool call (spans that do nothing, the metrics they update)."""
    completion = Completion(text="x")
    call = ToolCall("c1", "s0__echo", "{}")

    def turn() -> None:
        with ModelCallObservation("scripted", "turn 1") as observed:
            observed.completed(completion)
        with (
            tracing.open_span("execute_tool", lambda: {tracing.TOOL_NAME: call.name}, target=call.name),
            tracing.attached(None),
        ):
            tracing.capture()
        labelled(TOOL_CALLS, "s0", "echo", "ok").inc()
        labelled(TOOL_DURATION, "s0").observe(0.001)

    turn()
    start = time.process_time()
    for _ in range(repeat):
        turn()
    return (time.process_time() - start) / repeat


def jobs(setup: Setup) -> dict[str, Job]:
    """The rows of a workload: the same turns through the loop, the server handles, and the plain client."""
    workload = setup.workload
    handles = [setup.runtime.servers[i] for i in server_ids(workload.servers)]

    async def turns(call: Callable[[int], Awaitable[None]]) -> None:
        for _ in range(workload.turns):
            if workload.calls_per_turn == 1:
                await call(0)
                continue
            async with trio.open_nursery() as nursery:
                for _ in range(workload.per_server):
                    for index in range(workload.servers):
                        nursery.start_soon(call, index)

    async def raw_call(index: int) -> None:
        result = await setup.raw_clients[index].call_tool(workload.tool, workload.arguments)
        if result.is_error:
            raise RuntimeError(f"raw call failed: {result.content}")

    async def handle_call(index: int) -> None:
        outcome = await handles[index].call_tool(workload.tool, workload.arguments)
        if not outcome.ok:
            raise RuntimeError(f"handle call failed: {outcome.error}")

    async def raw() -> None:
        await turns(raw_call)

    async def handle() -> None:
        await turns(handle_call)

    def check(result: RunResult | None) -> None:
        calls = workload.turns * workload.calls_per_turn
        if result is None or result.outcome is not Outcome.ANSWERED or len(result.tool_results) != calls:
            ended = "without a result" if result is None else f"{result.outcome}: {len(result.tool_results)} calls"
            raise RuntimeError(f"loop run ended {ended}, {calls} expected")
        failed = [r for r in result.tool_results if not r.ok]
        if failed:
            raise RuntimeError(f"{len(failed)} loop calls failed, first: {failed[0].error}")

    async def loop() -> None:
        check(await setup.runtime.run("bench", "go"))

    async def stream() -> None:
        async with setup.runtime.open_run("bench", "go") as events:
            async for _ in events:
                pass
        check(events.result)

    async def traced() -> None:
        TRACING.switch(True)
        try:
            await loop()
        finally:
            TRACING.switch(False)

    def durable(manager: ConversationManager) -> Job:
        async def run() -> None:
            check(await manager.run("bench", "go"))

        return run

    rows = {"raw": raw, "handle": handle, "loop": loop, "stream": stream, "traced": traced}
    return rows | {name: durable(manager) for name, manager in setup.stores.items()}


@attrs.frozen
class Samples:
    """Per row: wall seconds, and CPU seconds of this process (the servers' own CPU is not in it)."""

    wall: dict[str, list[float]]
    cpu: dict[str, list[float]]


async def measure(runs: dict[str, Job], repeat: int) -> Samples:
    """One warm-up per row, then ``repeat`` interleaved rounds in alternating order."""
    samples = Samples({row: [] for row in runs}, {row: [] for row in runs})
    for run in runs.values():
        await run()
    for round_number in range(repeat):
        order = list(runs) if round_number % 2 == 0 else list(reversed(runs))
        for row in order:
            start, start_cpu = time.perf_counter(), time.process_time()
            await runs[row]()
            samples.cpu[row].append(time.process_time() - start_cpu)
            samples.wall[row].append(time.perf_counter() - start)
    return samples


def summarise(workload: Workload, samples: Samples) -> list[dict[str, Any]]:
    medians = {row: statistics.median(values) for row, values in samples.wall.items()}
    cpu = {row: statistics.median(values) for row, values in samples.cpu.items()}
    raw_turn = medians["raw"] / workload.turns
    rows = []
    for row, values in samples.wall.items():
        per_turn = medians[row] / workload.turns
        rows.append(
            {
                "workload": workload.name,
                "row": row,
                "servers": workload.servers,
                "turns": workload.turns,
                "calls_per_turn": workload.calls_per_turn,
                "samples_ms": [round(v * 1000, 2) for v in values],
                "median_ms": round(medians[row] * 1000, 2),
                "per_turn_ms": round(per_turn * 1000, 3),
                "overhead_per_turn_ms": round((per_turn - raw_turn) * 1000, 3),
                "vs_raw": round(medians[row] / medians["raw"], 3),
                "cpu_per_turn_ms": round(cpu[row] / workload.turns * 1000, 3),
                "cpu_vs_raw": round(cpu[row] / cpu["raw"], 3),
            }
        )
    return rows


def print_table(rows: list[dict[str, Any]], off_cost: float) -> None:
    header = (
        f"{'workload':<9} {'row':<7} {'S×T':>6} {'median ms':>10} {'ms/turn':>9} {'+ms/turn':>9} {'vs raw':>7}"
        f" {'cpu ms/turn':>12} {'cpu vs raw':>11}"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        shape = f"{r['servers']}×{r['turns']}"
        print(
            f"{r['workload']:<9} {r['row']:<7} {shape:>6} {r['median_ms']:>10.1f} {r['per_turn_ms']:>9.3f} "
            f"{r['overhead_per_turn_ms']:>9.3f} {r['vs_raw']:>7.3f} {r['cpu_per_turn_ms']:>12.3f} {r['cpu_vs_raw']:>11.3f}"
        )
    print(f"(target: loop at most {TARGET_RATIO} × raw per turn)")
    by_row = {(r["workload"], r["row"]): r for r in rows}
    for workload in dict.fromkeys(r["workload"] for r in rows):
        loop, traced = by_row.get((workload, "loop")), by_row.get((workload, "traced"))
        for store, target in (("sqlite", 0.20), ("redis", 0.30)):
            durable = by_row.get((workload, store))
            if loop and durable:
                wall = durable["per_turn_ms"] / loop["per_turn_ms"] - 1
                cpu = durable["cpu_per_turn_ms"] / loop["cpu_per_turn_ms"] - 1
                print(
                    f"[{workload}] the {store} store adds {wall:+.1%} wall, {cpu:+.1%} CPU per turn over loop "
                    f"(the memory store; target ≤ +{target:.0%})"
                )
        if loop and traced:
            wall = traced["per_turn_ms"] / loop["per_turn_ms"] - 1
            cpu = traced["cpu_per_turn_ms"] / loop["cpu_per_turn_ms"] - 1
            print(
                f"[{workload}] tracing on adds {wall:+.1%} wall, {cpu:+.1%} CPU per turn over loop "
                f"(target ≤ +15%; {TRACING.spans} spans recorded per traced run)"
            )
            share = off_cost * 1000 / loop["cpu_per_turn_ms"]
            print(
                f"[{workload}] tracing off, observability costs {off_cost * 1e6:.1f} µs per turn: "
                f"{share:.1%} of the loop's CPU per turn (target ≤ 2%)"
            )


async def profile_row(run: Job, repeat: int, profile: Path) -> None:
    """A cProfile of ``repeat`` runs of one row (after the timed rounds, so it slows none of them)."""
    profiler = cProfile.Profile()
    for _ in range(repeat):
        profiler.enable()
        await run()
        profiler.disable()
    profiler.dump_stats(profile)


async def run_benchmark(
    workloads: list[Workload], repeat: int, profile: Path | None = None, protocol: str = "auto"
) -> dict[str, Any]:
    load = figures.load_average()
    rows: list[dict[str, Any]] = []
    for workload in workloads:
        print(f"[{workload.name}] starting {workload.servers} stdio servers ...", file=sys.stderr, flush=True)
        async with open_setup(workload, protocol) as setup:
            rows.extend(summarise(workload, await measure(jobs(setup), repeat)))
            if profile is not None and workload is workloads[0]:
                await profile_row(jobs(setup)["loop"], repeat, profile)
    return {
        "benchmark": "loop",
        "params": {
            "repeat": repeat,
            "protocol": protocol,
            "workloads": [attrs.asdict(w) for w in workloads],
            "target_vs_raw": TARGET_RATIO,
        },
        "machine": figures.machine(load, trio=trio.__version__),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rows": rows,
        "observability_off_us_per_turn": round(observability_off_cost() * 1e6, 2),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=20, help="turns of the echo workload")
    parser.add_argument("--servers", type=int, default=4, help="servers of the sleep workload")
    parser.add_argument("--sleep-turns", type=int, default=3, help="turns of the sleep workload")
    parser.add_argument(
        "--batch-calls",
        type=int,
        default=16,
        help="calls in the batch workload's one turn (rounded up to a multiple of --servers)",
    )
    parser.add_argument("--latency-ms", type=float, default=100.0, help="how long each sleep call takes")
    parser.add_argument("--repeat", type=int, default=11, help="interleaved repetitions per row")
    parser.add_argument("--workloads", default="echo,sleep,batch", help="comma-separated: echo,sleep,batch")
    parser.add_argument(
        "--protocol",
        default="auto",
        choices=protocol_choices(),
        help="what the runtime's servers and the raw clients both speak (auto: the newest the test server speaks)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the JSON figures go")
    parser.add_argument(
        "--profile", type=Path, help="also write a cProfile of the first workload's loop row to this file, by layer"
    )
    args = parser.parse_args(argv)
    known = {
        "echo": Workload("echo", 1, args.turns, "echo", {"text": "x"}),
        "sleep": Workload("sleep", args.servers, args.sleep_turns, "sleep", {"seconds": args.latency_ms / 1000}),
        "batch": Workload(
            "batch", args.servers, 1, "sleep", {"seconds": args.latency_ms / 1000}, -(-args.batch_calls // args.servers)
        ),
    }
    names = [n for n in args.workloads.split(",") if n]
    unknown = set(names) - set(known)
    if unknown:
        parser.error(f"unknown workloads: {', '.join(sorted(unknown))}")
    # Before any MCPServer configures the root logger at INFO.
    logging.basicConfig(level=logging.WARNING)
    report = trio.run(run_benchmark, [known[n] for n in names], args.repeat, args.profile, args.protocol)
    print_table(report["rows"], report["observability_off_us_per_turn"] / 1e6)
    if args.profile is not None:
        first = known[names[0]]
        print(f"\nthe {first.name} loop row's time by layer, per turn (cProfile, {args.profile}; profile_layers.py):")
        profile_layers.main([str(args.profile), "--runs", str(args.repeat * first.turns), "--unit", "turn"])
    figures.write(args.out, report)


if __name__ == "__main__":
    main()
