"""A handshake-era server's question answered on the other worker: two ``server.py`` workers behind a real HAProxy,
sharing a real Redis store, one MCP server (the asking server over streamable HTTP, ``protocol: "legacy"``, so it
asks through ``elicitation/create`` while the call is open).

The run that asks goes to worker A, which holds the call open; the resume goes, through HAProxy, to worker B: the
tool's result holds what was entered, and the server's own count shows the call completed exactly once. When
worker A is killed with ``kill -9`` before the resume, worker B answers ``RUN_ERROR interrupt_expired`` once A's
holding has expired, and the next run tells the model the tool could not complete.

HAProxy routes by a query parameter (``?worker=a`` / ``?worker=b``), so which worker a connection lands on is the
test's choice; each worker's store object signs the runs it starts (``RunRecord.owner``), which shows it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from tests.integration.actor_checks import running
from tests.integration.asking_support import http_asking_server
from tests.integration.test_input_interrupts import BOOKING
from tests.integration.test_input_restart import the_question
from tests.integration.workers_support import two_service_workers
from tests.service.support import send, until_terminal
from tests.support import check_stream, needs_redis
from yao_actors.cli.chat import open_service_connection
from yao_actors.config import ServerSpec
from yao_actors.specs import StoreSpec
from yao_actors.store import open_store
from yao_actors.testing.fake_openai import FakeToolCall, RecordedRequest, Reply
from yao_actors.testing.redis_server import RedisServer

pytestmark = [
    needs_redis,
    pytest.mark.filterwarnings(r"ignore:Async generator '(httpx2|httpcore2)\.:ResourceWarning"),
]

GUARD = 120
LEASE_TTL = 3.0
"""A held call's holding lasts this long unless renewed (``store.lease_ttl``): short, so a dead holder is found soon."""
PREFIX = "workers:"
QUESTION = "Book the Grand for me"


def model(request: RecordedRequest) -> Reply:
    last = request.body["messages"][-1]
    if last["role"] == "user" and last["content"] == QUESTION:
        return Reply(tool_calls=(FakeToolCall("asking__book", json.dumps({"hotel": "Grand"}), "c1"),))
    return Reply(text=" | ".join(m["content"] for m in request.body["messages"] if m["role"] == "tool") or "ok")


@asynccontextmanager
async def two_workers(tmp_path: Path) -> AsyncIterator[Workers]:
    """Redis, the asking server, the fake model, workers A and B on them, and HAProxy in front of both."""
    redis = RedisServer(tmp_path)
    redis.start()
    try:
        async with http_asking_server() as server:
            servers = {"asking": {"url": server.url, "protocol": "legacy"}}
            store = {"type": "redis", "url": redis.url, "prefix": PREFIX, "lease_ttl": LEASE_TTL}
            async with two_service_workers(tmp_path, model, servers, store) as workers:
                yield Workers(workers.front, workers.a, server, workers.fake, redis.url)
    finally:
        redis.stop()


@attrs.frozen
class Workers:
    """What :func:`two_workers` started: HAProxy's URL, worker A's process, the MCP server, the model, Redis."""

    front: str
    holder: trio.Process
    server: Any
    fake: Any
    redis_url: str


async def run_on(front: str, worker: str, frame: dict[str, Any]) -> list[dict[str, Any]]:
    """Send ``frame`` on a connection HAProxy routes to ``worker``; the run's events to its terminal one."""
    async with open_service_connection(f"{front}?worker={worker}") as ws:
        await send(ws, frame)
        return await until_terminal(ws, frame["runId"])


def resume_frame(run_id: str, interrupt: dict[str, Any]) -> dict[str, Any]:
    payload = {"action": "accept", "content": BOOKING}
    resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": payload}]
    return {"type": "run", "runId": run_id, "threadId": "t1", "messages": [], "resume": resume}


def question_frame(run_id: str, text: str) -> dict[str, Any]:
    return {"type": "run", "runId": run_id, "threadId": "t1", "messages": [{"role": "user", "content": text}]}


async def owners(redis_url: str, *run_ids: str) -> list[str]:
    """The token of the store object (the worker) that started each run."""
    async with open_store(StoreSpec("redis", url=redis_url, prefix=PREFIX)) as store:
        return [(await store.get_run(run_id)).owner for run_id in run_ids]  # type: ignore[union-attr]


async def held_calls(redis_url: str) -> list[str]:
    async with open_store(StoreSpec("redis", url=redis_url, prefix=PREFIX)) as store:
        return sorted(await store.client.keys(f"{PREFIX}parked:*"))  # type: ignore[attr-defined]


async def bookings(server: Any) -> Any:
    async with running(ServerSpec("asking", server, protocol="legacy")) as handle:
        return (await handle.call_tool("bookings", {})).result


async def test_the_answer_reaches_the_worker_holding_the_call_and_it_completes_once(tmp_path: Path) -> None:
    with trio.fail_after(GUARD):
        async with two_workers(tmp_path) as w:
            first = await run_on(w.front, "a", question_frame("r1", QUESTION))
            interrupt = the_question(first)
            second = await run_on(w.front, "b", resume_frame("r2", interrupt))
            stale = await run_on(w.front, "b", resume_frame("r3", interrupt))
            left = await held_calls(w.redis_url)
            count = await bookings(w.server)
            ran_by = await owners(w.redis_url, "r1", "r2")
    assert ran_by[0] != ran_by[1]  # two workers: the resume ran on the one that did not hold the call
    check_stream(second)
    (result,) = [e for e in second if e["type"] == "TOOL_CALL_RESULT"]
    assert result["toolCallId"] == "c1"
    assert json.loads(result["content"]) == {"booked": True, "hotel": "Grand", **BOOKING, "count": 1}
    assert second[-1]["type"] == "RUN_FINISHED"  # worker B ran the rest of the loop: the model saw the result
    assert "Grand" in "".join(e.get("delta", "") for e in second if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert (stale[-1]["type"], stale[-1]["code"]) == ("RUN_ERROR", "unknown_interrupt")
    assert left == []  # the holding ended with the call
    assert count == {"count": 1}


async def test_a_holder_killed_with_kill_9_makes_the_resume_interrupt_expired(tmp_path: Path) -> None:
    with trio.fail_after(GUARD):
        async with two_workers(tmp_path) as w:
            interrupt = the_question(await run_on(w.front, "a", question_frame("r1", QUESTION)))
            assert len(await held_calls(w.redis_url)) == 1
            w.holder.kill()  # kill -9: the holding is no longer renewed
            await w.holder.wait()
            while await held_calls(w.redis_url):  # gone within LEASE_TTL  # noqa: ASYNC110
                await trio.sleep(0.2)
            late = await run_on(w.front, "b", resume_frame("r2", interrupt))
            after = await run_on(w.front, "b", question_frame("r3", "anything else?"))
            count = await bookings(w.server)
            fake = w.fake
    assert (late[-1]["type"], late[-1]["code"]) == ("RUN_ERROR", "interrupt_expired")
    assert "the tool could not complete" in late[-1]["message"]
    assert after[-1]["type"] == "RUN_FINISHED"
    told = [m for m in fake.requests[-1].body["messages"] if m.get("tool_call_id") == "c1"]
    assert len(told) == 1
    assert told[0]["content"].startswith("Error")
    assert count == {"count": 0}
