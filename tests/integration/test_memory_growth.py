"""What a run carries does not stay with the service (issue 29 defect 3): the real ``yao-actors serve``, runs of
1 MB on one thread, its RSS flat from run 10 on, with the offline model the service builds and with the OpenAI
provider, on the memory and the SQLite store.

It was +1518 MiB after 300 runs (offline model, memory store) and +451 MiB at best (OpenAI provider, SQLite): the
offline models kept every call's messages, the memory store every run's event log for a day, each run's order and
its front end's relay held each other in a cycle only a full collection freed (rare under the service's collector
policy), and glibc kept most freed megabyte-sized blocks. ``benchmarks/memory_growth.py`` runs the 300 runs of every
model and store and prints the curves.

Here the issue's own target is measured once in full (300 runs, the offline model on SQLite, the configuration whose
RSS moves most), and every model and store runs 60: a leak of what a run carries (1 MB) would add ~50 MiB over those,
while the allocator's one-time steps (a heap or arena extension, 2-4 MiB, seen at any run) stay well under the bound.
A least-squares slope over so few runs mistook one such step for a leak (3 MiB at run 20: "87 KiB a run").
"""

from __future__ import annotations

import collections
import gc
import importlib.util
import sys
from types import ModuleType
from typing import Any

import pytest
import trio
import trio.testing

from tests.integration.processes import REPO
from tests.service.support import run_frame, running_service, send, until_terminal
from yao_actors.cli.chat import open_service_connection
from yao_actors.config import AssistantSpec, Config, InMemoryTransport, ServerRef, ServerSpec
from yao_actors.models import Completion, FunctionModel, ToolCall
from yao_actors.runtime import open_runtime
from yao_actors.testing.servers import build_test_server

BASE = 10
#: The issue's target: after 300 runs, RSS within this many MiB of what it was after the first 10.
TARGET_RUNS = 300
GROWTH_MIB = 20.0
#: Every model and store: a leak of a run's 1 MB would be ~50 MiB over these, a leak of 200 KiB a run 10 MiB.
SHORT_RUNS = 60
SHORT_GROWTH_MIB = 10.0


def _benchmark() -> ModuleType:
    path = REPO / "benchmarks" / "memory_growth.py"
    spec = importlib.util.spec_from_file_location("memory_growth", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["memory_growth"] = module
    spec.loader.exec_module(module)
    return module


memory_growth = _benchmark()


def _figures(curve: Any) -> str:
    return "RSS after each run (MiB): " + ", ".join(f"{mib:.1f}" for mib in curve.rss_mib)


@pytest.mark.parametrize("store", ["memory", "sqlite"])
@pytest.mark.parametrize("model", ["test", "openai"])
async def test_runs_of_1_mb_on_one_thread_leave_the_service_flat(model: str, store: str) -> None:
    with trio.fail_after(300):
        curve = await memory_growth.measure(model, store, SHORT_RUNS)
    assert curve.growth(BASE) < SHORT_GROWTH_MIB, _figures(curve)


async def test_300_runs_of_1_mb_stay_within_20_mib_of_run_10() -> None:
    with trio.fail_after(900):
        curve = await memory_growth.measure("test", "sqlite", TARGET_RUNS)
    assert len(curve.rss_mib) == TARGET_RUNS
    assert curve.growth(BASE) < GROWTH_MIB, _figures(curve)


def _answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
    if messages[-1]["role"] == "tool":
        return Completion(text="done")
    return Completion(tool_calls=(ToolCall("c1", "s1__echo", '{"text": "big"}'),), finish_reason="tool_calls")


async def test_a_finished_run_is_freed_without_the_cyclic_collector() -> None:
    """A run's order and the front end's relay of it held each other (the order's consumer, the relay's stream):
    the run's events, its tool results among them, waited for a full collection, which the service's collector
    policy makes rare (the service grew by ~1 GB before one came). Now a finished run is freed by reference
    counting: a run over the websocket leaves no cyclic garbage of a run's objects."""
    config = Config(
        servers={"s1": ServerSpec("s1", InMemoryTransport(build_test_server("s1")))},
        assistants={"default": AssistantSpec(id="default", model="m", servers=(ServerRef("s1"),))},
    )
    model = FunctionModel(_answer, keep_calls=0)
    with trio.fail_after(60):
        async with (
            open_runtime(config, models={"m": model}) as runtime,
            running_service(runtime) as service,
            open_service_connection(service.url) as ws,
        ):
            await send(ws, run_frame("warm up", run_id="warm-up", thread_id="t"))
            await until_terminal(ws, "warm-up")
            gc.collect()
            gc.disable()
            try:
                for n in range(3):
                    await send(ws, run_frame("go", run_id=f"r{n}", thread_id="t"))
                    assert (await until_terminal(ws, f"r{n}"))[-1]["type"] == "RUN_FINISHED"
                await trio.testing.wait_all_tasks_blocked()
                gc.set_debug(gc.DEBUG_SAVEALL)
                gc.collect()
                garbage = collections.Counter(type(o).__qualname__ for o in gc.garbage)
            finally:
                gc.set_debug(0)
                gc.garbage.clear()
                gc.enable()
    assert not {name: n for name, n in garbage.items() if name in RUN_OBJECTS}, garbage.most_common(20)


#: The objects of a run, which must not be left to the cyclic collector.
RUN_OBJECTS = {
    "RunRequest",
    "RunOrder",
    "RunControl",
    "RunStream",
    "RunResult",
    "RunJournal",
    "WireEvent",
    "ToolCallResult",
    "RunRelay",
}
