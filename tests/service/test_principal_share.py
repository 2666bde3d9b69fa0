"""Each principal holds at most its share of the service's runs (``server.max_runs_per_principal``), detached ones
included: a principal that starts runs and drops, again and again, never locks the others out."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
from prometheus_client import REGISTRY

from tests.service.agui_support import post_agui, run_input
from tests.service.fake_runtime import FakeRuntime
from tests.service.support import receive, run_frame, running_service, send, until_terminal, wait_until
from yao_actors.cli.chat import open_service_connection
from yao_actors.config import AssistantSpec, Config, InMemoryTransport, ServerRef, ServerSpec, ServiceSpec
from yao_actors.errors import RunErrorCode
from yao_actors.models.base import Completion, ToolCall
from yao_actors.runtime import Runtime, open_runtime
from yao_actors.service import Service
from yao_actors.service.budget import RunBudget, TooManyRuns, principal_share
from yao_actors.testing import FunctionModel
from yao_actors.testing.servers import build_test_server

MALLORY = "mallory-token-of-16+"
ALICE = "alice-token-of-16+!"


@pytest.mark.parametrize(
    ("limits", "principals", "share"),
    [
        pytest.param({}, 2, 500, id="default-several-principals"),
        pytest.param({"max_runs": 3}, 5, 1, id="at-least-one"),
        pytest.param({}, 1, 2000, id="one-principal-all"),
        pytest.param({"max_runs_per_principal": 7}, 1, 7, id="set"),
    ],
)
def test_a_principals_share(limits: dict[str, int], principals: int, share: int) -> None:
    assert principal_share(ServiceSpec(**limits), principals) == share  # type: ignore[arg-type]


async def test_the_budget_refuses_a_principal_past_its_share_and_anyone_past_the_limit() -> None:
    async with trio.open_nursery() as nursery:
        budget = RunBudget(limit=3, per_principal=2, nursery=nursery)
        a1, a2 = budget.acquire("a"), budget.acquire("a")
        with pytest.raises(TooManyRuns) as mine:
            budget.acquire("a")
        b1 = budget.acquire("b")
        with pytest.raises(TooManyRuns) as full:
            budget.acquire("c")
        a1.release()
        a1.release()  # once only
        c1 = budget.acquire("c")
        for slot in (a2, b1, c1):
            slot.release()
    assert (mine.value.code, mine.value.principal_limit) == (RunErrorCode.TOO_MANY_RUNS, True)
    assert "principal 'a' is at its limit of 2 runs in flight (server.max_runs_per_principal;" in str(mine.value)
    assert (full.value.principal_limit, str(full.value)) == (False, "the service is at its limit of 3 runs")


async def test_the_slots_held_gauge_counts_each_slot_from_its_taking_to_its_giving_back() -> None:
    def held() -> float:
        return REGISTRY.get_sample_value("yao_run_slots_held") or 0.0

    async with trio.open_nursery() as nursery:
        budget = RunBudget(limit=3, nursery=nursery)
        before = held()
        slots = [budget.acquire("a"), budget.acquire(None), budget.acquire("c")]
        with pytest.raises(TooManyRuns):
            budget.acquire("d")  # refused: no slot, nothing counted
        taken = held() - before
        slots[0].release()
        slots[0].release()  # once only
        one_back = held() - before
        for slot in slots[1:]:
            slot.release()
    assert (taken, one_back, held() - before) == (3, 2, 0)
    assert (budget.active, budget.held) == (0, {})


async def test_a_share_of_every_run_is_refused_as_the_services_limit() -> None:
    async with trio.open_nursery() as nursery:
        budget = RunBudget(limit=2, per_principal=2, nursery=nursery)
        slots = [budget.acquire(None), budget.acquire(None)]
        with pytest.raises(TooManyRuns) as full:
            budget.acquire(None)
        for slot in slots:
            slot.release()
    assert (full.value.principal_limit, str(full.value)) == (False, "the service is at its limit of 2 runs")


def _model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    """``slow`` sits in a 600-second tool call; anything else is answered at once."""
    if messages[-1] == {"role": "user", "content": "slow"}:
        return Completion(tool_calls=(ToolCall("slow", "s1__sleep", '{"seconds": 600}'),))
    return "done"


@asynccontextmanager
async def two_principals(**limits: Any) -> AsyncIterator[tuple[Runtime, Service]]:
    """mallory and alice on a service with room for 8 runs (2 each by default), whose ``slow`` runs take 600 s."""
    config = Config(
        servers={"s1": ServerSpec("s1", InMemoryTransport(build_test_server("s1")))},
        assistants={"default": AssistantSpec(id="default", model="m", servers=(ServerRef("s1"),))},
    )
    async with (
        open_runtime(config, models={"m": FunctionModel(_model, stream=False)}) as runtime,
        running_service(
            runtime, tokens={"mallory": MALLORY, "alice": ALICE}, max_runs=8, detach_grace=600.0, **limits
        ) as service,
    ):
        yield runtime, service


async def _start_runs_and_drop(service: Service, round_: int, refusals: list[str]) -> None:
    """mallory's round: a connection's worth of slow runs (8), then gone without a word once each is answered."""
    async with open_service_connection(service.url, token=MALLORY) as ws:
        run_ids = {f"m{round_}-{n}" for n in range(8)}
        for run_id in sorted(run_ids):
            await send(ws, run_frame("slow", run_id=run_id))
        while run_ids:
            frame = await receive(ws)
            if frame["type"] == "RUN_ERROR":
                refusals.append(frame["message"])
                run_ids.discard(frame["runId"])
            elif frame["type"] == "TOOL_CALL_END":
                run_ids.discard(frame["runId"])


async def test_a_principal_that_starts_runs_and_drops_never_locks_another_out(autojump_clock: trio.abc.Clock) -> None:
    refusals: list[str] = []
    answered: list[str] = []
    with trio.fail_after(3600):
        async with two_principals() as (_, service), trio.open_nursery() as attack:

            async def keep_attacking() -> None:
                for round_ in range(1000):
                    await _start_runs_and_drop(service, round_, refusals)
                    await trio.sleep(2)

            attack.start_soon(keep_attacking)
            await wait_until(lambda: len(refusals) >= 6)  # mallory holds her share: 2 runs, detached
            async with open_service_connection(service.url, token=ALICE) as ws:
                for n in range(30):
                    await send(ws, run_frame(f"question {n}", run_id=f"a{n}"))
                    answered.append((await until_terminal(ws, f"a{n}"))[-1]["type"])
                    await trio.sleep(1)  # 30 s of mallory's rounds, one every 2 s
            held = service.statistics().runs
            attack.cancel_scope.cancel()
    assert answered == ["RUN_FINISHED"] * 30
    assert held == 2  # mallory's first two, detached
    assert len(refusals) >= 6 + 8 * 10  # round after round, none of hers past the first two was admitted
    assert all(r.startswith("principal 'mallory' is at its limit of 2 runs in flight") for r in refusals)


async def test_post_agui_is_held_to_the_principals_share_with_429() -> None:
    runtime = FakeRuntime()
    mallory, alice = {"authorization": f"Bearer {MALLORY}"}, {"authorization": f"Bearer {ALICE}"}
    with trio.fail_after(10):
        async with (
            running_service(runtime, tokens={"mallory": MALLORY, "alice": ALICE}, max_runs=4) as service,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(
                functools.partial(post_agui, service.port, run_input("hold:m", run_id="m1"), headers=mallory)
            )
            await wait_until(lambda: runtime.started == ["m1"])
            refused = await post_agui(service.port, run_input("hold:m", run_id="m2"), headers=mallory)
            ok = await post_agui(service.port, run_input("hi", thread_id="t2", run_id="a1"), headers=alice)
            runtime.release("m")
    assert refused.status == 429
    assert refused.json()["error"]["code"] == "too_many_runs"
    assert refused.json()["error"]["message"].startswith("principal 'mallory' is at its limit of 1 runs in flight")
    assert (ok.status, ok.events[-1]["type"]) == (200, "RUN_FINISHED")
