"""A run waiting on an MCP task outlives its worker (issue 41, the durable half), with real parts: the service as
``server.py`` processes, the 2026-07-28 tasks-extension test server over streamable HTTP as its own process (a
stdio server would die with the worker), the fake OpenAI endpoint as the model, SQLite (a restart of the killed
service) and a real redis-server behind a real HAProxy (another worker). The task server's record shows the
task ran once; a client that resumes the run sees one ``TOOL_CALL_RESULT`` and one terminal event."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import attrs
import trio

from tests.integration.processes import service_process, stop, write_config
from tests.integration.task_runs_support import task_caller, until_task_stored
from tests.integration.workers_support import two_service_workers
from tests.service.support import receive, run_frame, send, until_terminal
from tests.support import app_activity_after_result
from yao_actors.cli.chat import open_service_connection
from yao_actors.specs import StoreSpec
from yao_actors.store import open_store
from yao_actors.testing.fake_openai import open_fake_openai
from yao_actors.testing.processes import open_http_task_server
from yao_actors.testing.redis_server import RedisServer
from yao_actors.testing.task_record import read_task_record
from yao_actors.testing.task_servers import SHOW_APP_URI

GUARD = 90
PREFIX = "tasks:"


def report(said: str) -> str:
    return f"报告: {said}"


def researcher(gate: Path) -> Any:
    """A model that asks for ``slow_echo`` (a task held until ``gate`` exists), then answers with its result."""
    return task_caller("slow_echo", {"text": "北京 3°C", "steps": 1, "gate": str(gate)}, report)


@attrs.frozen
class Restarted:
    """The service started again after a ``kill -9`` mid-task (:func:`restarted_after_kill`)."""

    process: Any
    url: str
    before: list[dict[str, Any]]  #: the run's events the client saw before the kill
    record: Path  #: the task server's record of what its task bodies did
    store: str  #: the SQLite file
    fake: Any  #: the fake OpenAI endpoint (its ``requests``)


@contextlib.asynccontextmanager
async def restarted_after_kill(
    tmp_path: Path, model: Callable[[Path], Any], text: str, meanwhile: Callable[[str], None] = lambda _: None
) -> AsyncIterator[Restarted]:
    """The service (SQLite) takes run r1 on thread t1 (``text``) and is killed with -9 once the run's task is
    stored; with no service running, ``meanwhile(store path)`` runs and the task's gate opens (``model(gate)``
    is the model); then the service starts again."""
    record, gate = tmp_path / "tasks.jsonl", tmp_path / "gate"
    store = {"type": "sqlite", "path": str(tmp_path / "conversations.sqlite3"), "lease_ttl": 1.0}
    async with open_http_task_server(record) as tasks, open_fake_openai(model(gate)) as fake:
        config = write_config(tmp_path, fake.base_url, {"tasks": {"url": await tasks.url()}}, store)
        async with service_process(config) as (process, url), open_service_connection(url) as ws:
            await send(ws, run_frame(text, run_id="r1", thread_id="t1"))
            before = await until_task_stored(ws, "r1")
            process.kill()
            await process.wait()
        meanwhile(store["path"])
        gate.touch()  # the task may go on now: while no service is running
        async with service_process(config) as (process, url):
            yield Restarted(process, url, before, record, store["path"], fake)


def check_one_result(events: list[dict[str, Any]]) -> None:
    results = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert len(results) == 1, events
    assert "北京 3°C" in results[0]["content"]
    terminal = [e for e in events if e["type"] in ("RUN_FINISHED", "RUN_ERROR")]
    assert [e["type"] for e in terminal] == ["RUN_FINISHED"], terminal
    assert terminal[0]["result"]["text"].startswith("报告: ")
    assert "北京 3°C" in terminal[0]["result"]["text"]
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs))


async def test_kill_9_of_the_service_mid_task_and_a_restart_go_on_with_the_task_it_ran_once(tmp_path: Path) -> None:
    with trio.fail_after(GUARD):
        async with restarted_after_kill(tmp_path, researcher, "研究一下北京的天气") as service:
            async with open_service_connection(service.url) as ws:
                await send(ws, {"type": "resume", "runId": "r1", "afterSeq": 0})
                resumed = await until_terminal(ws, "r1")
            async with open_service_connection(service.url) as ws:
                await send(ws, {"type": "history", "threadId": "t1"})
                snapshot = await receive(ws)
            assert await stop(service.process) == 0
        async with open_store(StoreSpec.sqlite(service.store)) as kept:
            left = await kept.tasks().for_thread("t1")  # type: ignore[union-attr]
    before, record, fake = service.before, service.record, service.fake
    check_one_result(resumed)
    assert left == []  # the run is over: its task's handle went with its close-out
    assert [e["type"] for e in before if e["type"] == "TOOL_CALL_RESULT"] == []
    ran = read_task_record(record)
    assert [line["event"] for line in ran] == ["ran", "completed"]  # the task ran once, across the kill -9
    assert [m["role"] for m in snapshot["messages"]] == ["user", "assistant", "tool", "assistant"]
    [run] = snapshot["runs"]
    assert run["outcome"] == "answered"
    tool_requests = [r for r in fake.requests if r.body["messages"][-1]["role"] == "tool"]
    assert len(tool_requests) == 1  # the result reached the model once


async def test_kill_9_of_one_worker_mid_task_and_the_other_behind_haproxy_finishes_it(tmp_path: Path) -> None:
    record, gate = tmp_path / "tasks.jsonl", tmp_path / "gate"
    redis = RedisServer(tmp_path)
    redis.start()
    try:
        with trio.fail_after(GUARD):
            store = {"type": "redis", "url": redis.url, "prefix": PREFIX, "lease_ttl": 1.0}
            async with open_http_task_server(record) as tasks:
                servers = {"tasks": {"url": await tasks.url()}}
                async with two_service_workers(tmp_path, researcher(gate), servers, store) as workers:
                    front, worker_a, fake = workers.front, workers.a, workers.fake
                    async with open_service_connection(f"{front}?worker=a") as ws:
                        await send(ws, run_frame("研究一下北京的天气", run_id="r1", thread_id="t1"))
                        before = await until_task_stored(ws, "r1")
                        worker_a.kill()
                        await worker_a.wait()
                    gate.touch()
                    async with open_service_connection(f"{front}?worker=b") as ws:
                        await send(ws, {"type": "resume", "runId": "r1", "afterSeq": before[-1]["seq"]})
                        resumed = await until_terminal(ws, "r1")
                    async with open_service_connection(f"{front}?worker=b") as ws:
                        await send(ws, {"type": "history", "threadId": "t1"})
                        snapshot = await receive(ws)
            async with open_store(StoreSpec("redis", url=redis.url, prefix=PREFIX)) as kept:
                left = await kept.tasks().for_thread("t1")  # type: ignore[union-attr]
    finally:
        redis.stop()
    check_one_result(resumed)
    assert left == []
    assert resumed[0]["seq"] == before[-1]["seq"] + 1  # the events after those seen, none twice
    assert [line["event"] for line in read_task_record(record)] == ["ran", "completed"]
    assert [m["role"] for m in snapshot["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert [r["outcome"] for r in snapshot["runs"]] == ["answered"]
    assert len([r for r in fake.requests if r.body["messages"][-1]["role"] == "tool"]) == 1


def asker(gate: Path) -> Any:
    """A model that asks for ``ask`` (a task that asks the user once ``gate`` exists), then answers with its result."""
    return task_caller("ask", {"question": "Which branch?", "gate": str(gate)}, report)


async def test_a_task_taken_up_after_a_restart_that_asks_the_user_ends_the_run_with_the_question(
    tmp_path: Path,
) -> None:
    with trio.fail_after(GUARD):
        async with restarted_after_kill(tmp_path, asker, "问我一个问题") as service:  # it asks once restarted
            async with open_service_connection(service.url) as ws:
                await send(ws, {"type": "resume", "runId": "r1", "afterSeq": 0})
                asked = await until_terminal(ws, "r1")
            (interrupt,) = asked[-1]["outcome"]["interrupts"]
            payload = {"action": "accept", "content": {"answer": "main"}}
            resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": payload}]
            async with open_service_connection(service.url) as ws:
                await send(ws, {"type": "run", "runId": "r2", "threadId": "t1", "messages": [], "resume": resume})
                answered = await until_terminal(ws, "r2")
            assert await stop(service.process) == 0
    record = service.record
    assert asked[-1]["type"] == "RUN_FINISHED"
    assert interrupt["message"] == "Which branch?"
    assert [e for e in asked if e["type"] == "TOOL_CALL_RESULT"] == []
    check_one_result_text(answered, "you said: main")
    assert [line["event"] for line in read_task_record(record)] == ["ran", "completed"]  # one task, answered


def check_one_result_text(events: list[dict[str, Any]], text: str) -> None:
    results = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert len(results) == 1, events
    assert text in results[0]["content"]
    assert events[-1]["type"] == "RUN_FINISHED"
    assert text in events[-1]["result"]["text"]


def shower(gate: Path) -> Any:
    """A model that asks for ``show_later`` (a task of a tool with an interface, held until ``gate`` exists)."""
    return task_caller("show_later", {"value": 21, "gate": str(gate)}, lambda _: "shown")


async def test_a_task_of_a_tool_with_an_interface_taken_up_after_a_restart_emits_its_activity(
    tmp_path: Path,
) -> None:
    with trio.fail_after(GUARD):
        async with restarted_after_kill(tmp_path, shower, "show 21") as service:
            async with open_service_connection(service.url) as ws:
                await send(ws, {"type": "resume", "runId": "r1", "afterSeq": service.before[-1]["seq"]})
                resumed = await until_terminal(ws, "r1")
            assert await stop(service.process) == 0
    record, gate = service.record, tmp_path / "gate"
    kinds = [e["type"] for e in resumed]
    assert kinds.count("TOOL_CALL_RESULT") == 1
    assert kinds.count("ACTIVITY_SNAPSHOT") == 1
    _, activity = app_activity_after_result(resumed)  # right after the result, as in the first process
    content = activity["content"]
    assert content["result"]["structuredContent"] == {"value": 21, "double": 42}
    assert (content["resourceUri"], content["serverId"]) == (SHOW_APP_URI, "tasks")
    assert content["toolInput"] == {"value": 21, "gate": str(gate)}
    assert resumed[-1]["type"] == "RUN_FINISHED"
    assert [line["event"] for line in read_task_record(record)] == ["ran", "completed"]  # once, across the kill


def corrupt_the_task_record(path: str) -> None:
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute('UPDATE tasks SET handle = \'{"design": "x"\'')


async def test_a_corrupt_task_record_closes_its_run_as_interrupted_and_the_restarted_service_runs_on(
    tmp_path: Path,
) -> None:
    with trio.fail_after(GUARD):  # the record goes bad on disk; the service still starts and serves
        async with restarted_after_kill(tmp_path, researcher, "研究一下北京的天气", corrupt_the_task_record) as service:
            async with open_service_connection(service.url) as ws:
                await send(ws, {"type": "resume", "runId": "r1", "afterSeq": 0})
                closed = await until_terminal(ws, "r1")
            async with open_service_connection(service.url) as ws:
                await send(ws, run_frame("再研究一次", run_id="r2", thread_id="t2"))
                after = await until_terminal(ws, "r2")
            assert await stop(service.process) == 0
        async with open_store(StoreSpec.sqlite(service.store)) as kept:
            left = await kept.tasks().for_thread("t1")  # type: ignore[union-attr]
    terminal = closed[-1]
    assert terminal["type"] == "RUN_ERROR"
    assert terminal["code"] == "interrupted"
    assert "stored task record could not be read" in terminal["message"], terminal
    assert left == []  # set aside: the thread reads again
    check_one_result(after)
