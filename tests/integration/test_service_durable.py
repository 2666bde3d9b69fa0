"""The durable-conversation frames over real loopback websockets and the real runtime: history, threads, forget,
resume after a dropped connection, principals, and a Redis store stopped and started between runs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.service.agui_support import post_agui, run_input
from tests.service.support import receive, run_frame, running_service, send, until_terminal, wait_until
from tests.support import check_stream, needs_redis
from yao_actors.cli.chat import open_service_connection
from yao_actors.config import AssistantSpec, Config, InMemoryTransport, ServerRef, ServerSpec, ServiceSpec
from yao_actors.models.base import Completion, ToolCall
from yao_actors.runtime import Runtime, open_runtime
from yao_actors.service import Service
from yao_actors.specs import StoreSpec
from yao_actors.testing import FunctionModel
from yao_actors.testing.redis_server import RedisServer
from yao_actors.testing.servers import build_test_server

GUARD = 60


class Gate:
    """A model that calls ``echo`` once, then waits for :meth:`open` before it answers."""

    def __init__(self) -> None:
        self.opened = trio.Event()

    async def __call__(self, messages: Sequence[dict[str, Any]], tools: object) -> Completion | str:
        if messages[-1]["role"] == "tool":
            await self.opened.wait()
            return "好的，完成了。"
        return Completion(tool_calls=(ToolCall("c1", "test__echo", '{"text": "北京"}'),))


def open_gate() -> Gate:
    """A :class:`Gate` already open: its model answers as soon as ``echo`` has."""
    gate = Gate()
    gate.opened.set()
    return gate


@asynccontextmanager
async def durable_service(store: StoreSpec, model: Any, **service: Any) -> AsyncIterator[tuple[Runtime, Service]]:
    config = Config(
        servers={"test": ServerSpec("test", InMemoryTransport(build_test_server()))},
        assistants={"default": AssistantSpec("default", "m", servers=(ServerRef("test"),))},
        store=store,
        service=ServiceSpec(**service),
    )
    async with (
        open_runtime(config, models={"m": FunctionModel(model, chunk_size=3)}) as runtime,
        running_service(runtime, **{k: v for k, v in service.items() if k == "tokens"}) as served,
    ):
        yield runtime, served


async def test_history_threads_and_forget_over_the_wire(tmp_path: Path) -> None:
    gate = open_gate()
    with trio.fail_after(GUARD):
        async with (
            durable_service(StoreSpec.sqlite(tmp_path / "c.sqlite3"), gate) as (_, service),
            open_service_connection(service.url) as ws,
        ):
            await send(ws, run_frame("北京天气?", run_id="r1", thread_id="t1"))
            await until_terminal(ws, "r1")
            await send(ws, {"type": "history", "threadId": "t1"})
            snapshot = await receive(ws)
            await send(ws, {"type": "threads"})
            threads = await receive(ws)
            await send(ws, {"type": "forget", "threadId": "t1"})
            forgotten = await receive(ws)
            await send(ws, {"type": "forget", "threadId": "t1"})
            again = await receive(ws)
            await send(ws, {"type": "history", "threadId": "t1"})
            empty = await receive(ws)
    assert snapshot["type"] == "MESSAGES_SNAPSHOT"
    assert snapshot["threadId"] == "t1"
    assert [m["role"] for m in snapshot["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert snapshot["messages"][1]["toolCalls"][0]["function"]["name"] == "test__echo"
    assert snapshot["messages"][2]["toolCallId"] == snapshot["messages"][1]["toolCalls"][0]["id"]
    assert snapshot["messages"][3]["content"] == "好的，完成了。"
    [run] = snapshot["runs"]
    assert run["runId"] == "r1"
    assert run["assistant"] == "default"
    assert run["outcome"] == "answered"
    assert run["startedAt"] <= run["finishedAt"]
    assert [t["threadId"] for t in threads["threads"]] == ["t1"]
    assert forgotten == {"type": "forgotten", "threadId": "t1"}
    assert again["type"] == "error"
    assert again["code"] == "unknown_thread"
    assert empty["messages"] == empty["runs"] == []


async def test_resume_after_a_dropped_connection_replays_exactly_the_missed_events(tmp_path: Path) -> None:
    gate = Gate()
    with trio.fail_after(GUARD):
        async with durable_service(StoreSpec.sqlite(tmp_path / "c.sqlite3"), gate) as (_, service):
            seen: list[dict[str, Any]] = []
            async with open_service_connection(service.url) as first:
                await send(first, run_frame("北京天气?", run_id="r1", thread_id="t1"))
                while not seen or seen[-1]["type"] != "TOOL_CALL_RESULT":
                    seen.append(await receive(first))
            # The connection is gone; the run waits for the model, kept going for detach_grace.
            await wait_until(lambda: service.statistics().connections == 0)
            gate.opened.set()
            async with open_service_connection(service.url) as second:
                await send(second, {"type": "resume", "runId": "r1", "afterSeq": seen[-1]["seq"]})
                rest = await until_terminal(second, "r1")
                await send(second, {"type": "resume", "runId": "nope"})
                unknown = await receive(second)
    everything = seen + rest
    check_stream(everything)
    assert [e["seq"] for e in everything] == list(range(1, len(everything) + 1))
    assert everything[-1]["type"] == "RUN_FINISHED"
    assert everything[-1]["result"]["text"] == "好的，完成了。"
    assert (unknown["type"], unknown["code"], unknown["runId"]) == ("RUN_ERROR", "unknown_run", "nope")


async def test_resume_while_the_run_goes_on_follows_it_live(tmp_path: Path) -> None:
    gate = Gate()
    with trio.fail_after(GUARD):
        async with durable_service(StoreSpec.sqlite(tmp_path / "c.sqlite3"), gate) as (_, service):
            async with open_service_connection(service.url) as first:
                await send(first, run_frame("北京天气?", run_id="r1", thread_id="t1"))
                while (await receive(first))["type"] != "TOOL_CALL_RESULT":
                    pass
            async with open_service_connection(service.url) as second:
                await send(second, {"type": "resume", "runId": "r1", "afterSeq": 0})
                head = [await receive(second) for _ in range(3)]
                gate.opened.set()
                rest = await until_terminal(second, "r1")
    everything = head + rest
    check_stream(everything)
    assert everything[0]["type"] == "RUN_STARTED"
    assert [e["seq"] for e in everything] == list(range(1, len(everything) + 1))


async def test_another_principals_thread_is_unknown_to_every_frame(tmp_path: Path) -> None:
    gate = open_gate()
    tokens = {"alice": "a" * 20, "bob": "b" * 20}
    with trio.fail_after(GUARD):
        async with durable_service(StoreSpec.sqlite(tmp_path / "c.sqlite3"), gate, tokens=tokens) as (_, service):
            async with open_service_connection(service.url, token=tokens["alice"]) as alice:
                await send(alice, run_frame("秘密", run_id="r1", thread_id="t1"))
                await until_terminal(alice, "r1")
            async with open_service_connection(service.url, token=tokens["bob"]) as bob:
                answers = []
                for frame in (
                    {"type": "history", "threadId": "t1"},
                    {"type": "resume", "runId": "r1"},
                    {"type": "forget", "threadId": "t1"},
                    {"type": "threads"},
                    run_frame("偷看", run_id="r2", thread_id="t1"),
                ):
                    await send(bob, frame)
                    answers.append(await receive(bob))
    history, resume, forget, threads, run = answers
    assert history["messages"] == history["runs"] == []
    assert (resume["type"], resume["code"]) == ("RUN_ERROR", "unknown_run")
    assert (forget["type"], forget["code"]) == ("error", "unknown_thread")
    assert threads == {"type": "threads", "threads": []}
    assert (run["type"], run["code"], run["runId"]) == ("RUN_ERROR", "unknown_thread", "r2")


@needs_redis
async def test_redis_stopped_between_runs_gives_store_unavailable_and_the_service_recovers(redis: RedisServer) -> None:
    with trio.fail_after(GUARD):
        async with (
            durable_service(StoreSpec("redis", url=redis.url, prefix="svc:"), open_gate()) as (_, service),
            open_service_connection(service.url) as ws,
        ):
            await send(ws, run_frame("一", run_id="r1", thread_id="t1"))
            first = await until_terminal(ws, "r1")
            redis.stop()
            await send(ws, run_frame("二", run_id="r2", thread_id="t1"))
            down = await until_terminal(ws, "r2")
            redis.start()
            await send(ws, run_frame("三", run_id="r3", thread_id="t1"))
            back = await until_terminal(ws, "r3")
            await send(ws, {"type": "history", "threadId": "t1"})
            snapshot = await receive(ws)
    assert first[-1]["type"] == back[-1]["type"] == "RUN_FINISHED"
    assert (down[-1]["type"], down[-1]["code"]) == ("RUN_ERROR", "store_unavailable")
    assert "unreachable" in down[-1]["message"]
    assert [m["content"] for m in snapshot["messages"] if m["role"] == "user"] == ["一", "三"]
    assert [r["runId"] for r in snapshot["runs"]] == ["r1", "r3"]


@needs_redis
async def test_post_agui_answers_503_store_unavailable_while_redis_is_stopped(redis: RedisServer) -> None:
    with trio.fail_after(GUARD):
        async with durable_service(StoreSpec("redis", url=redis.url, prefix="svc:"), open_gate()) as (_, service):
            first = await post_agui(service.port, run_input("一", thread_id="t1", run_id="r1"))
            redis.stop()
            down = await post_agui(service.port, run_input("二", thread_id="t1", run_id="r2"))
            redis.start()
            back = await post_agui(service.port, run_input("三", thread_id="t1", run_id="r3"))
    assert (first.status, first.events[-1]["type"]) == (200, "RUN_FINISHED")
    assert (down.status, down.headers["content-type"]) == (503, "application/json")
    assert down.json()["error"]["code"] == "store_unavailable"
    assert "conversation store is unavailable" in down.json()["error"]["message"]
    assert (back.status, back.events[-1]["type"]) == (200, "RUN_FINISHED")


async def test_an_sqlite_store_out_of_reach_is_said_to_clients_without_its_path(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The store's files deleted under the service: the websocket's run and history frames, and ``POST /agui``,
    say only that the conversation store is unavailable; the file's path goes to the log."""
    database = tmp_path / "private" / "c.sqlite3"
    database.parent.mkdir()
    gate = open_gate()
    with trio.fail_after(GUARD):
        async with durable_service(StoreSpec.sqlite(database), gate) as (_, service):
            async with open_service_connection(service.url) as ws:
                await send(ws, run_frame("北京天气?", run_id="r1", thread_id="t1"))
                assert (await until_terminal(ws, "r1"))[-1]["type"] == "RUN_FINISHED"
                for name in await trio.Path(database.parent).iterdir():
                    await name.unlink()
                await send(ws, run_frame("还有吗?", run_id="r2", thread_id="t2"))
                ended = (await until_terminal(ws, "r2"))[-1]
                await send(ws, {"type": "history", "threadId": "t1"})
                history = await receive(ws)
            posted = await post_agui(service.port, run_input("三", thread_id="t3", run_id="r3"))
    said = "the conversation store is unavailable"
    assert (ended["type"], ended["code"], ended["message"]) == ("RUN_ERROR", "store_unavailable", said)
    assert (history["type"], history["code"], history["message"]) == ("error", "store_unavailable", said)
    assert (posted.status, posted.json()["error"]) == (503, {"code": "store_unavailable", "message": said})
    logged = [r.getMessage() for r in caplog.records if r.name == "yao_actors.errors"]
    assert logged
    assert all(f"{database} was deleted while the store had it open" in line for line in logged), logged
