"""A run whose client left (detached, waiting for a resume) still counts against ``server.max_runs`` until it ends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from tests.service.support import receive, run_frame, running_service, send, until_terminal, wait_until
from yao_actors.cli.chat import open_service_connection
from yao_actors.config import AssistantSpec, Config, InMemoryTransport, ServerRef, ServerSpec
from yao_actors.models.base import Completion, ToolCall
from yao_actors.runtime import Runtime, open_runtime
from yao_actors.service import Service
from yao_actors.testing import FunctionModel
from yao_actors.testing.servers import build_test_server


def _slow_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    if messages[-1]["role"] == "user":
        return Completion(tool_calls=(ToolCall("slow", "s1__sleep", '{"seconds": 600}'),))
    return "done"


@asynccontextmanager
async def one_run_service() -> AsyncIterator[tuple[Runtime, Service]]:
    """A service with room for one run at a time, whose runs sit in a 600-second tool call until cancelled."""
    config = Config(
        servers={"s1": ServerSpec("s1", InMemoryTransport(build_test_server("s1")))},
        assistants={"default": AssistantSpec(id="default", model="m", servers=(ServerRef("s1"),))},
    )
    async with (
        open_runtime(config, models={"m": FunctionModel(_slow_model, stream=False)}) as runtime,
        running_service(runtime, max_runs=1, detach_grace=600.0) as service,
    ):
        yield runtime, service


async def _start_and_drop(service: Service, run_id: str) -> None:
    """Start a run, wait until it is in its tool call, and leave without a word (the run detaches)."""
    async with open_service_connection(service.url) as ws:
        await send(ws, run_frame("go", run_id=run_id))
        while (await receive(ws))["type"] != "TOOL_CALL_END":
            pass
    await wait_until(lambda: service.statistics().connections == 0)


async def test_a_detached_run_keeps_its_slot_until_it_ends() -> None:
    with trio.fail_after(30):
        async with one_run_service() as (_, service):
            await _start_and_drop(service, "r1")
            assert service.statistics().runs == 1  # the run goes on detached, and holds the one slot
            async with open_service_connection(service.url) as ws:
                await send(ws, run_frame("again", run_id="r2"))
                refused = await receive(ws)
                assert (refused["type"], refused["runId"], refused["code"]) == ("RUN_ERROR", "r2", "too_many_runs")
                await send(ws, {"type": "resume", "runId": "r1"})
                await send(ws, {"type": "cancel", "runId": "r1"})
                events = await until_terminal(ws, "r1")
                assert events[-1]["outcome"] == {"type": "cancelled"}
                await wait_until(lambda: service.statistics().runs == 0)  # the run ended: its slot is free
                await send(ws, run_frame("now", run_id="r3"))
                assert (await receive(ws))["type"] == "RUN_STARTED"


async def test_shutdown_cancels_a_detached_run_after_the_grace() -> None:
    with trio.fail_after(30):
        async with one_run_service() as (runtime, service):
            await _start_and_drop(service, "r1")
            assert service.statistics().runs == 1
            await service.shutdown()  # the test spec's shutdown_grace, then the detached run is cancelled
            assert service.statistics().runs == 0
            [run] = (await runtime.history((await runtime.threads())[0].thread_id)).runs
    assert (run.run_id, run.outcome) == ("r1", "cancelled")
