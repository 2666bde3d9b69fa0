"""``POST /agui`` clients that stop reading: they never keep a run's slot past its run, and are dropped after
``server.idle_timeout``. Real loopback sockets whose receive buffers the kernel fills; trio's autojump clock plays
the deadlines (``tests/integration/test_service_admission.py`` has the same with a real service process)."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from tests.service.agui_support import post_agui, run_input, stalled_agui
from tests.service.fake_runtime import FakeRuntime
from tests.service.support import running_service, wait_until
from yao_actors.config import AssistantSpec, Config, RunTimeouts
from yao_actors.runtime import open_runtime
from yao_actors.testing import FunctionModel

#: Text far larger than any socket buffer on the way, in 64 KiB deltas.
FLOOD = "x" * (8 << 20)


def _flooding_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
    return FLOOD if messages[-1]["content"] == "flood" else "ok"


async def test_a_client_that_never_reads_gives_its_runs_slot_back_when_the_run_ends(
    autojump_clock: trio.abc.Clock,
) -> None:
    config = Config(assistants={"default": AssistantSpec(id="default", model="m", timeouts=RunTimeouts(run=5))})
    model = FunctionModel(_flooding_model, chunk_size=65536)
    with trio.fail_after(3600):
        async with (
            open_runtime(config, models={"m": model}) as runtime,
            running_service(runtime, max_runs=1, idle_timeout=100_000) as service,
            stalled_agui(service.port, run_input("flood", thread_id="t1", run_id="stalled")),
        ):
            await wait_until(lambda: service.statistics().runs == 1)
            # The run fills the client's socket, meets its deadline and ends; the client has not read a byte.
            await wait_until(lambda: service.statistics().runs == 0)
            assert service.statistics().connections == 1  # its answer still waits for the client
            response = await post_agui(service.port, run_input("hello", thread_id="t2", run_id="next"))
            [stalled] = (await runtime.history("t1")).runs
    assert (response.status, response.events[-1]["type"]) == (200, "RUN_FINISHED")
    assert stalled.outcome == "error"


async def test_a_client_that_takes_nothing_for_the_idle_timeout_is_dropped_and_its_run_cancelled(
    autojump_clock: trio.abc.Clock,
) -> None:
    runtime = FakeRuntime()
    with trio.fail_after(3600):
        async with running_service(runtime, max_runs=1, idle_timeout=30) as service:
            async with stalled_agui(service.port, run_input("flood:1000", run_id="stalled")):
                await wait_until(lambda: runtime.sent.get("stalled", 0) > 1)
                started = trio.current_time()
                await wait_until(lambda: "stalled" in runtime.cancelled)
                dropped_after = trio.current_time() - started
                await wait_until(lambda: (service.statistics().connections, service.statistics().runs) == (0, 0))
            response = await post_agui(service.port, run_input("hello", run_id="next"))
    assert dropped_after == pytest.approx(30, abs=0.5)
    assert response.status == 200
