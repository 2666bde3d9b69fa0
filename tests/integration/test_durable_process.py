"""Durable conversations end to end through a real ``server.py`` process, with SQLite and with Redis.

The model is the fake OpenAI-compatible endpoint (``yao_actors.testing.fake_openai``), so every request the
service sends is recorded; the tools are the test MCP server as a stdio subprocess of the service. Each test
stops the service the way the issue names: ``SIGTERM`` and a restart, ``kill -9`` during a tool call, a
client whose connection drops mid-run.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.integration.processes import service_process, stop, write_config
from tests.service.support import receive, run_frame, send, until_terminal
from tests.support import check_stream, needs_redis
from yao_actors.cli.chat import open_service_connection
from yao_actors.testing.fake_openai import FakeToolCall, RecordedRequest, Reply, open_fake_openai
from yao_actors.testing.redis_server import RedisServer

GUARD = 90
TEST_SERVER = {"test": {"command": sys.executable, "args": ["-m", "yao_actors.testing.servers"]}}


def model(request: RecordedRequest) -> Reply:
    """``天气`` asks for ``echo``; ``睡`` for a 60-second ``sleep``; ``慢`` answers slowly; a tool result or
    anything else is answered with how many messages the request carried."""
    last = request.body["messages"][-1]
    if last["role"] == "user" and "天气" in last["content"]:
        return Reply(tool_calls=(FakeToolCall("test__echo", json.dumps({"text": "北京 3°C"}), "c1"),))
    if last["role"] == "user" and "睡" in last["content"]:
        return Reply(tool_calls=(FakeToolCall("test__sleep", json.dumps({"seconds": 60}), "c1"),))
    if last["role"] == "user" and "慢" in last["content"]:
        return Reply(text="慢慢地回答这个问题。" * 3, chunk_size=2, chunk_delay=0.05)
    return Reply(text=f"{len(request.body['messages'])} 条消息")


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=needs_redis)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, Any]]:
    if request.param == "sqlite":
        yield {"type": "sqlite", "path": str(tmp_path / "conversations.sqlite3")}
        return
    redis = RedisServer(tmp_path)
    redis.start()
    try:
        yield {"type": "redis", "url": redis.url, "prefix": "e2e:"}
    finally:
        redis.stop()


async def history(url: str, thread_id: str) -> dict[str, Any]:
    async with open_service_connection(url) as ws:
        await send(ws, {"type": "history", "threadId": thread_id})
        return await receive(ws)


async def test_a_thread_survives_sigterm_and_restart(tmp_path: Path, store: dict[str, Any]) -> None:
    with trio.fail_after(GUARD):
        async with open_fake_openai(model) as fake:
            config = write_config(tmp_path, fake.base_url, TEST_SERVER, store)
            async with service_process(config) as (process, url):
                async with open_service_connection(url) as ws:
                    await send(ws, run_frame("北京天气怎么样?", run_id="r1", thread_id="t1"))
                    first = await until_terminal(ws, "r1")
                assert await stop(process) == 0
            async with service_process(config) as (process, url):
                snapshot = await history(url, "t1")
                async with open_service_connection(url) as ws:
                    await send(ws, run_frame("明天呢?", run_id="r2", thread_id="t1"))
                    second = await until_terminal(ws, "r2")
                assert await stop(process) == 0
    assert first[-1]["type"] == second[-1]["type"] == "RUN_FINISHED"
    assert [m["role"] for m in snapshot["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert [r["runId"] for r in snapshot["runs"]] == ["r1"]
    assert snapshot["runs"][0]["outcome"] == "answered"
    request = fake.requests[-1].body["messages"]  # the second run's model request, after the restart
    conversation = [m for m in request if m["role"] != "system"]
    assert [m["role"] for m in conversation] == ["user", "assistant", "tool", "assistant", "user"]
    assert conversation[0]["content"] == "北京天气怎么样?"
    assert conversation[1]["tool_calls"][0]["function"]["name"] == "test__echo"
    assert "北京 3°C" in conversation[2]["content"]
    assert conversation[-1]["content"] == "明天呢?"
    assert second[-1]["result"]["text"] == f"{len(request)} 条消息"


async def test_kill_9_during_a_tool_call_leaves_the_run_interrupted_and_the_thread_usable(
    tmp_path: Path, store: dict[str, Any]
) -> None:
    with trio.fail_after(GUARD):
        async with open_fake_openai(model) as fake:
            # A short lease: the restarted service closes the dead run once its lease expires.
            config = write_config(tmp_path, fake.base_url, TEST_SERVER, {**store, "lease_ttl": 1.0})
            async with service_process(config) as (process, url), open_service_connection(url) as ws:
                await send(ws, run_frame("睡一会儿", run_id="r1", thread_id="t1"))
                seen = [await receive(ws)]
                while seen[-1]["type"] != "TOOL_CALL_END":
                    seen.append(await receive(ws))
                await trio.sleep(1)  # the 60-second call is at the server, and the events so far are stored
                process.kill()
                await process.wait()
            async with service_process(config) as (process, url):
                async with open_service_connection(url) as ws:
                    await send(ws, {"type": "resume", "runId": "r1", "afterSeq": 0})
                    replayed = await until_terminal(ws, "r1")  # followed in the store until it is closed
                snapshot = await history(url, "t1")
                async with open_service_connection(url) as ws:
                    await send(ws, run_frame("还在吗?", run_id="r2", thread_id="t1"))
                    after = await until_terminal(ws, "r2")
                assert await stop(process) == 0
    assert process.returncode == 0
    [run] = [r for r in snapshot["runs"] if r["runId"] == "r1"]
    assert run["outcome"] == "interrupted"
    assert [m["role"] for m in snapshot["messages"]] == ["user"]  # no tool call left without its result
    assert replayed[-1]["type"] == "RUN_ERROR"
    assert replayed[-1]["code"] == "interrupted"
    # What was stored before the kill (the events are written behind the run: within 50 ms of the tool call
    # starting, so normally all of `seen`) is exactly what was sent, with no gap before the terminal event.
    stored = replayed[:-1]
    assert stored
    assert stored[: len(seen)] == seen[: len(stored)]
    assert replayed[-1]["seq"] == len(replayed)
    assert after[-1]["type"] == "RUN_FINISHED"
    request = fake.requests[-1].body["messages"]
    conversation = [(m["role"], m.get("content")) for m in request if m["role"] != "system"]
    assert conversation == [("user", "睡一会儿"), ("user", "还在吗?")]


async def test_resume_after_a_dropped_connection_replays_exactly_the_missed_events(
    tmp_path: Path, store: dict[str, Any]
) -> None:
    with trio.fail_after(GUARD):
        async with open_fake_openai(model) as fake:
            config = write_config(tmp_path, fake.base_url, TEST_SERVER, store)
            async with service_process(config) as (process, url):
                seen: list[dict[str, Any]] = []
                async with open_service_connection(url) as ws:
                    await send(ws, run_frame("慢慢说", run_id="r1", thread_id="t1"))
                    while len(seen) < 5:
                        seen.append(await receive(ws))
                async with open_service_connection(url) as ws:
                    await send(ws, {"type": "resume", "runId": "r1", "afterSeq": seen[-1]["seq"]})
                    rest = await until_terminal(ws, "r1")
                    await send(ws, {"type": "resume", "runId": "r1", "afterSeq": 0})
                    replayed = await until_terminal(ws, "r1")
                assert await stop(process) == 0
    everything = seen + rest
    check_stream(everything)
    assert [e["seq"] for e in everything] == list(range(1, len(everything) + 1))
    assert everything[-1]["type"] == "RUN_FINISHED"
    assert everything[-1]["result"]["text"] == "慢慢地回答这个问题。" * 3
    assert replayed == everything
