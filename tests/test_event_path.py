"""The path of a run's events and turns to the wire and the store (issue 15): each event encoded once, the memory
store keeping that text, messages measured once, the memory budget checked in O(1) per run, the thread of a
run in progress never forgotten by the memory store's budget, and no coredis without a Redis store."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import weakref
from typing import Any

import pytest
import trio

from tests.service.support import connected, run_frame, send
from tests.support import check_stream
from tests.test_conversation import open_weather_manager, scripted, text_reply
from yao_actors import history_budget
from yao_actors.config import AssistantSpec, Config, ServerRef
from yao_actors.errors import RunErrorCode
from yao_actors.events import Outcome, WireEvent, encoded_event, stored_events
from yao_actors.models.base import Completion, ToolCall
from yao_actors.service.protocol import encode
from yao_actors.store import MemoryStore, RunStatus
from yao_actors.testing import FunctionModel, stdio_test_server

# --------------------------------------------------------------------------- encoded once


def test_a_wire_event_is_encoded_once_as_the_wire_encodes_frames() -> None:
    for value in ({"type": "TEXT_MESSAGE_CONTENT", "delta": "北京今天25度", "seq": 1}, {"delta": "\ud800", "seq": 2}):
        event = WireEvent(value)
        text = event.encoded()
        assert event.encoded() is text  # made once, then kept
        assert encoded_event(event) is text
        assert text == encode(value)  # the text a frame of the same dict goes out as
        assert json.loads(text) == event
    assert encoded_event({"seq": 3}) == '{"seq":3}'


def _echo_then_answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    if messages[-1]["role"] == "user":
        return Completion(tool_calls=(ToolCall("c1", "s1__echo", json.dumps({"text": "北京今天适合穿什么?"})),))
    return "北京今天25度, 穿短袖"


async def test_the_wire_and_the_store_get_the_same_text_of_each_event() -> None:
    config = Config(
        servers={"s1": stdio_test_server("s1")},
        assistants={"default": AssistantSpec(id="default", model="m", servers=(ServerRef("s1"),))},
    )
    with trio.fail_after(60):
        async with connected(config, FunctionModel(_echo_then_answer)) as (runtime, ws):
            await send(ws, run_frame("北京今天适合穿什么?", run_id="r1", thread_id="t1"))
            wire: list[str] = []
            while not wire or json.loads(wire[-1])["type"] not in ("RUN_FINISHED", "RUN_ERROR"):
                message = await ws.get_message()
                assert isinstance(message, str)
                wire.append(message)
            store = runtime.conversations.store
            assert isinstance(store, MemoryStore)
            await runtime.conversations.thread("t1")  # the run is over (its record closed) once the thread is free
            stored = await store.read_events("r1")
            texts = store._logs.by_run["r1"].texts  # what the memory store keeps: the text itself
    events = [json.loads(text) for text in wire]
    check_stream(events)
    assert events[-1]["type"] == "RUN_FINISHED"
    assert any(e["type"] == "TOOL_CALL_RESULT" and "北京" in e["content"] for e in events)
    assert texts == wire  # byte for byte
    assert stored == events


async def test_the_store_keeps_the_very_text_a_runs_consumer_got() -> None:
    model = scripted(text_reply("北京今天25度"))
    with trio.fail_after(10):
        async with open_weather_manager(model) as manager:
            async with manager.open_run("a", "北京今天适合穿什么?", run_id="r", thread_id="t") as stream:
                received = [event async for event in stream]
            store = manager.store
            assert isinstance(store, MemoryStore)
            texts = store._logs.by_run["r"].texts
    check_stream(received)
    assert all(type(event) is WireEvent for event in received)
    assert len(texts) == len(received)
    assert all(kept is event.encoded() for kept, event in zip(texts, received, strict=True))  # no second encoding


async def test_the_memory_store_keeps_text_and_copies_on_read() -> None:
    store = MemoryStore()
    await store.open_thread("t", None)
    await store.start_run("t", "r", "a", [{"role": "user", "content": "北京今天适合穿什么?"}])
    given = [WireEvent({"type": "RUN_STARTED", "threadId": "t", "runId": "r", "seq": 1})]
    plain = {"type": "STEP_STARTED", "stepName": "s", "seq": 2}
    await store.append_turn("t", "r", [], stored_events([*given, plain]))
    assert store._logs.by_run["r"].texts[0] is given[0].encoded()  # the event's own text, not a copy of it
    plain["stepName"] = "changed"  # the store kept its own text, not the caller's dict
    first = await store.read_events("r")
    assert first == [dict(given[0]), {"type": "STEP_STARTED", "stepName": "s", "seq": 2}]
    first[0]["type"] = "changed"  # nor does a reader share it
    assert await store.read_events("r", after_seq=0) == [dict(given[0]), first[1]]
    assert await store.read_events("r", after_seq=1) == [first[1]]


def test_a_history_takes_the_sizes_it_is_given_and_measures_the_others() -> None:
    message: dict[str, Any] = {"role": "user", "content": "北京今天适合穿什么?"}
    size = history_budget.message_bytes(message)
    message["content"] += "x" * 100  # (a recorded message never changes: this shows which size is used)
    history = history_budget.BoundedHistory()
    history.extend([message], [size])
    assert history.bytes == size  # the given measure
    other = history_budget.BoundedHistory()
    other.extend([message])
    assert other.bytes == history_budget.message_bytes(message) > size  # none given: measured
    with pytest.raises(ValueError, match="1 messages with 2 sizes"):
        other.extend([message], [1, 2])
    assert other.messages == [message]  # refused whole: nothing of it kept


class Kept(dict[str, Any]):
    """A message that can be followed with a weak reference."""


async def test_a_message_the_memory_store_measured_is_not_kept_alive_once_forgotten() -> None:
    store = MemoryStore()
    message = Kept(role="user", content="北京今天适合穿什么?")
    followed = weakref.ref(message)
    await store.open_thread("t", None)
    await store.start_run("t", "r", "a", [message])
    del message
    assert followed() is not None  # the store's
    await store.forget_thread("t")
    assert followed() is None  # nothing else held it (no size cache keyed by the message)


async def test_a_thread_takes_the_sizes_its_runs_journal_measured() -> None:
    model = scripted(text_reply("北京今天25度"))
    with trio.fail_after(10):
        async with open_weather_manager(model) as manager:
            await manager.run("a", "北京今天适合穿什么?", thread_id="t")
            history = manager.history("t")
            thread = await manager.thread("t")
    assert [m["role"] for m in history] == ["user", "assistant"]
    assert thread.history_bytes == sum(map(history_budget.message_bytes, history))


# --------------------------------------------------------------------------- the memory budget, a running total


async def test_the_memory_budget_keeps_a_running_total_and_forgets_the_least_recently_used() -> None:
    model = scripted(*(text_reply("ok") for _ in range(25)))
    with trio.fail_after(30):
        async with open_weather_manager(model, limits={"max_threads_bytes": 5000}) as manager:
            for i in range(20):
                await manager.run("a", "x" * 10, thread_id=f"t{i}")
            await manager.run("a", "y" * 10, thread_id="t5")
            assert len(manager.thread_ids()) == 20  # 20 threads of ~210 bytes each: within the budget
            kept_bytes = [(await manager.thread(t)).history_bytes for t in manager.thread_ids()]
            assert manager._threads.total_bytes == sum(kept_bytes)
            # Over the budget now: the least recently used idle threads go, oldest first, and no more than needed.
            await manager.run("a", "z" * 1500, thread_id="big")
            kept = manager.thread_ids()
            assert manager._threads.total_bytes == sum([(await manager.thread(t)).history_bytes for t in kept])
    assert kept[-1] == "big"
    used = [*(f"t{i}" for i in range(20) if i != 5), "t5"]  # least recently used first
    forgotten = [t for t in used if t not in kept]
    assert 0 < len(forgotten) < 20
    assert forgotten == used[: len(forgotten)]  # the least recently used ones, and no more
    assert manager._threads.total_bytes <= 5000


# --------------------------------------------------------------------------- the memory store's budget


async def test_the_memory_store_never_forgets_a_thread_with_a_run_in_progress() -> None:
    store = MemoryStore(max_threads_bytes=3000)
    await store.open_thread("busy", None)
    await store.start_run("busy", "r-busy", "a", [{"role": "user", "content": "a" * 1000}])
    await store.open_thread("idle", None)
    await store.start_run("idle", "r-idle", "a", [{"role": "user", "content": "b" * 500}])
    await store.finish_run("r-idle", status=RunStatus.FINISHED, outcome="answered")
    await store.open_thread("new", None)
    await store.start_run("new", "r-new", "a", [{"role": "user", "content": "c" * 1500}])
    # Over the budget: the idle thread goes, the older one whose run is going on stays.
    assert await store.get_thread("idle") is None
    assert await store.get_thread("busy") is not None
    await store.append_turn("busy", "r-busy", [{"role": "assistant", "content": "d" * 1000}], [])  # no KeyError
    assert [m["content"][0] for m in await store.load_history("busy")] == ["a", "d"]
    await store.finish_run("r-busy", status=RunStatus.FINISHED, outcome="answered")
    await store.append_turn("new", "r-new", [{"role": "assistant", "content": "e" * 10}], [])
    assert await store.get_thread("busy") is None  # no longer in use: the least recently written goes now


async def test_a_thread_the_store_forgot_under_its_actor_ends_runs_with_store_unavailable() -> None:
    model = scripted(*(text_reply("好的") for _ in range(3)))
    with trio.fail_after(10):
        async with open_weather_manager(model) as manager:
            first = await manager.run("a", "北京今天适合穿什么?", thread_id="t")
            assert await manager.store.forget_thread("t")  # behind the actor's back
            lost = await manager.run("a", "again", thread_id="t")
            other = await manager.run("a", "还有吗?", thread_id="u")
    assert first.ok
    assert other.ok
    assert lost.outcome is Outcome.ERROR
    assert lost.code is RunErrorCode.STORE_UNAVAILABLE
    assert "no longer in the store" in (lost.error or "")
    assert lost.events[-1]["type"] == "RUN_ERROR"


# --------------------------------------------------------------------------- coredis only for Redis

_NO_REDIS = textwrap.dedent(
    """
    import sys, trio
    from yao_actors.config import AssistantSpec, Config
    from yao_actors.runtime import open_runtime
    from yao_actors.testing import FunctionModel

    async def main() -> None:
        config = Config(assistants={"a": AssistantSpec(id="a", model="m")})
        async with open_runtime(config, models={"m": FunctionModel(lambda messages, tools: "好的")}) as runtime:
            assert (await runtime.run("a", "北京今天适合穿什么?")).ok
        print("coredis" in sys.modules)

    trio.run(main)
    """
)


def test_a_runtime_without_a_redis_store_does_not_import_coredis() -> None:
    done = subprocess.run([sys.executable, "-c", _NO_REDIS], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "False"
