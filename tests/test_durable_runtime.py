"""Durable conversations through the public Runtime: the store section, history, runs, resume, forget, faults."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from tests.detach_support import seen_until_detached
from tests.support import check_stream
from yao_actors.config import AssistantSpec, Config, InMemoryTransport, ServerRef, ServerSpec, ServiceSpec
from yao_actors.errors import RunError, RunErrorCode, StoreUnavailable
from yao_actors.events import Outcome, stored_events
from yao_actors.models import Completion, FunctionModel, ToolCall
from yao_actors.runtime import open_runtime
from yao_actors.specs import StoreSpec
from yao_actors.store import MemoryStore, RunStatus, open_store
from yao_actors.testing.servers import build_test_server

GUARD = 30


def config(store: StoreSpec | None = None, *, detach_grace: float = 30.0) -> Config:
    servers = {"test": ServerSpec("test", InMemoryTransport(build_test_server()))}
    assistant = AssistantSpec("a", "m", ("Be brief.",), (ServerRef("test"),))
    return Config(
        servers=servers, assistants={"a": assistant}, store=store, service=ServiceSpec(detach_grace=detach_grace)
    )


def sqlite(tmp_path: Path) -> StoreSpec:
    return StoreSpec.sqlite(tmp_path / "state" / "conversations.sqlite3")


def echo_then_answer(messages: Sequence[dict[str, Any]], tools: object) -> Completion | str:
    """One ``echo`` call per question, then an answer naming how many messages the request had."""
    if messages[-1]["role"] == "tool":
        return f"{len(messages)} messages"
    return Completion(tool_calls=(ToolCall("", "test__echo", '{"text": "hi"}'),))


async def test_a_thread_survives_the_runtime_in_sqlite_and_the_next_request_carries_it(tmp_path: Path) -> None:
    model = FunctionModel(echo_then_answer)
    with trio.fail_after(GUARD):
        async with open_runtime(config(sqlite(tmp_path)), models={"m": model}) as runtime:
            first = await runtime.run("a", "第一个问题", thread_id="t1")
        async with open_runtime(config(sqlite(tmp_path)), models={"m": model}) as runtime:
            stored = await runtime.history("t1")
            second = await runtime.run("a", "第二个问题", thread_id="t1")
    assert first.text == "4 messages"  # system, question, assistant call, tool result
    roles = [m["role"] for m in stored.messages]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert stored.messages[0]["content"] == "第一个问题"
    assert stored.messages[1]["tool_calls"][0]["function"]["name"] == "test__echo"
    [run] = stored.runs
    assert (run.run_id, run.status, run.outcome, run.assistant) == (first.run_id, RunStatus.FINISHED, "answered", "a")
    assert run.finished_at is not None
    request = model.calls[2].messages  # the second run's first model call
    assert [m["content"] for m in request if m["role"] == "user"] == ["第一个问题", "第二个问题"]
    assert second.text == "8 messages"


async def test_the_wire_form_of_a_history_is_an_agui_messages_snapshot_with_runs(tmp_path: Path) -> None:
    with trio.fail_after(GUARD):
        async with open_runtime(config(sqlite(tmp_path)), models={"m": FunctionModel(echo_then_answer)}) as runtime:
            result = await runtime.run("a", "hello", thread_id="t")
            wire = (await runtime.history("t")).to_wire()
            unknown = (await runtime.history("nobody")).to_wire()
    assert wire["type"] == "MESSAGES_SNAPSHOT"
    assert wire["threadId"] == "t"
    user, call, tool, answer = wire["messages"]
    assert user == {"id": "t.1", "role": "user", "content": "hello"}
    assert call["toolCalls"][0]["function"] == {"name": "test__echo", "arguments": '{"text": "hi"}'}
    assert tool["toolCallId"] == call["toolCalls"][0]["id"]
    assert answer["content"] == "4 messages"
    [run] = wire["runs"]
    assert run["runId"] == result.run_id
    assert run["outcome"] == "answered"
    assert run["startedAt"].endswith("Z")
    assert run["usage"]["total_tokens"] == 0
    assert unknown == {"type": "MESSAGES_SNAPSHOT", "threadId": "nobody", "messages": [], "runs": []}


async def test_a_runs_input_is_stored_when_it_starts(tmp_path: Path) -> None:
    release = trio.Event()
    asked = trio.Event()

    async def slow(messages: object, tools: object) -> str:
        asked.set()
        await release.wait()
        return "done"

    with trio.fail_after(GUARD):
        async with (
            open_runtime(config(sqlite(tmp_path)), models={"m": FunctionModel(slow)}) as runtime,
            runtime.open_run("a", "还在想吗?", thread_id="t") as stream,
        ):
            assert (await stream.receive())["type"] == "RUN_STARTED"
            await asked.wait()  # the model is asked once the run's start is stored (store calls run in threads,
            # which wait_all_tasks_blocked counts as blocked)
            while_running = await runtime.history("t")
            release.set()
            events = [event async for event in stream]
    assert [m["content"] for m in while_running.messages] == ["还在想吗?"]
    assert [(r.status, r.outcome) for r in while_running.runs] == [(RunStatus.RUNNING, None)]
    assert events[-1]["type"] == "RUN_FINISHED"


async def test_a_run_cancelled_during_a_tool_call_stores_the_call_with_a_cancelled_result(tmp_path: Path) -> None:
    def sleepy(messages: Sequence[dict[str, Any]], tools: object) -> Completion:
        return Completion(tool_calls=(ToolCall("c1", "test__sleep", '{"seconds": 60}'),))

    with trio.fail_after(GUARD):
        async with open_runtime(config(sqlite(tmp_path)), models={"m": FunctionModel(sleepy)}) as runtime:
            async with runtime.open_run("a", "sleep", thread_id="t") as stream:
                async for event in stream:
                    if event["type"] == "TOOL_CALL_END":
                        while runtime.servers["test"].statistics().in_flight == 0:  # noqa: ASYNC110
                            await trio.sleep(0.01)  # until the call is at the server
                        stream.cancel()
            stored = await runtime.history("t")
    assert [m["role"] for m in stored.messages] == ["user", "assistant", "tool"]
    assert stored.messages[2]["content"].startswith("Error: ")
    assert [(r.status, r.outcome) for r in stored.runs] == [(RunStatus.FINISHED, "cancelled")]


async def test_a_run_left_running_by_a_dead_process_is_closed_interrupted_and_the_thread_goes_on(
    tmp_path: Path,
) -> None:
    spec = sqlite(tmp_path)
    with trio.fail_after(GUARD):
        async with open_store(spec) as dead:  # another process's store object, which never finishes its run
            await dead.open_thread("t", None)
            await dead.start_run("t", "r-dead", "a", [{"role": "user", "content": "lost?"}])
            await dead.append_events(
                "r-dead", stored_events([{"type": "RUN_STARTED", "threadId": "t", "runId": "r-dead", "seq": 1}])
            )
        model = FunctionModel(lambda messages, tools: f"{len(messages)} messages")
        async with open_runtime(config(spec), models={"m": model}) as runtime:
            stored = await runtime.history("t")
            async with runtime.open_resume("r-dead") as replay:
                replayed = [event async for event in replay]
            again = await runtime.run("a", "again", thread_id="t")
    assert [(r.run_id, r.status, r.outcome) for r in stored.runs] == [("r-dead", RunStatus.INTERRUPTED, "interrupted")]
    assert [e["type"] for e in replayed] == ["RUN_STARTED", "RUN_ERROR"]
    assert replayed[-1]["code"] == "interrupted"
    assert again.outcome is Outcome.ANSWERED
    assert again.text == "3 messages"  # the system prompt, "lost?" and "again": nothing dangling


async def test_resume_after_detaching_replays_exactly_the_missed_events_then_the_live_ones() -> None:
    release = trio.Event()

    async def script(messages: Sequence[dict[str, Any]], tools: object) -> Completion | str:
        if messages[-1]["role"] == "tool":
            await release.wait()
            return "all done"
        return Completion(tool_calls=(ToolCall("c1", "test__echo", '{"text": "x"}'),))

    with trio.fail_after(GUARD):
        async with open_runtime(config(), models={"m": FunctionModel(script, chunk_size=2)}) as runtime:
            seen = await seen_until_detached(runtime, "go", "TOOL_CALL_RESULT", thread_id="t", run_id="r1")
            await trio.testing.wait_all_tasks_blocked()
            async with runtime.open_resume("r1", after_seq=seen[-1]["seq"]) as resumed:  # live
                release.set()
                rest = [event async for event in resumed]
            async with runtime.open_resume("r1", after_seq=2) as stored:  # the run is over: from the store
                from_store = [event async for event in stored]
    everything = seen + rest
    check_stream(everything)
    assert [e["seq"] for e in everything] == list(range(1, len(everything) + 1))
    assert everything[-1]["type"] == "RUN_FINISHED"
    assert everything[-1]["result"]["text"] == "all done"
    assert from_store == everything[2:]


async def test_a_detached_run_nobody_resumes_is_cancelled_after_the_grace(autojump_clock: trio.abc.Clock) -> None:
    async def never(messages: object, tools: object) -> str:
        await trio.sleep_forever()
        raise AssertionError

    async with open_runtime(config(detach_grace=30), models={"m": FunctionModel(never)}) as runtime:
        async with runtime.open_run("a", "wait", thread_id="t", run_id="r") as stream:
            await stream.receive()
            stream.detach()
        await trio.sleep(29)
        assert (await runtime.history("t")).runs[0].status is RunStatus.RUNNING
        await trio.sleep(2)
        [run] = (await runtime.history("t")).runs
        async with runtime.open_resume("r") as replay:
            events = [event async for event in replay]
    assert (run.status, run.outcome) == (RunStatus.FINISHED, "cancelled")
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["outcome"] == {"type": "cancelled"}


async def test_another_principals_thread_and_runs_are_as_unknown_and_forget_deletes(tmp_path: Path) -> None:
    model = FunctionModel(lambda messages, tools: "ok")
    with trio.fail_after(GUARD):
        async with open_runtime(config(sqlite(tmp_path)), models={"m": model}) as runtime:
            result = await runtime.run("a", "mine", thread_id="t", principal="alice")
        async with open_runtime(config(sqlite(tmp_path)), models={"m": model}) as runtime:  # across a restart
            seen_by_bob = await runtime.history("t", principal="bob")
            with pytest.raises(RunError) as resume:
                async with runtime.open_resume(result.run_id, principal="bob"):
                    pass
            with pytest.raises(RunError) as run:
                await runtime.run("a", "theirs", thread_id="t", principal="bob")
            bob_forgets = await runtime.forget("t", principal="bob")
            listed = [t.thread_id for t in await runtime.threads(principal="alice")]
            alice_forgets = await runtime.forget("t", principal="alice")
            after = await runtime.history("t", principal="alice")
    assert seen_by_bob.messages == seen_by_bob.runs == ()
    assert resume.value.code is RunErrorCode.UNKNOWN_RUN
    assert run.value.code is RunErrorCode.UNKNOWN_THREAD
    assert (bob_forgets, listed, alice_forgets) == (False, ["t"], True)
    assert after.messages == after.runs == ()


@attrs.define(eq=False)
class FlakyStore(MemoryStore):
    """A memory store whose writes fail with ``StoreUnavailable`` while ``down``."""

    down: bool = False

    @property
    def writes_in_step(self) -> bool:
        return False  # its append_turn is what fails: the run's turns go through it

    def _check(self) -> None:
        if self.down:
            raise StoreUnavailable("the test's store is down")

    async def start_run(self, *args: Any, **kwargs: Any) -> Any:
        self._check()
        return await super().start_run(*args, **kwargs)

    async def append_messages(self, *args: Any, **kwargs: Any) -> None:
        self._check()
        await super().append_messages(*args, **kwargs)

    async def append_turn(self, *args: Any, **kwargs: Any) -> None:
        self._check()
        await super().append_turn(*args, **kwargs)

    async def open_thread(self, *args: Any, **kwargs: Any) -> Any:
        self._check()
        return await super().open_thread(*args, **kwargs)


@attrs.define(eq=False)
class CountingStore(MemoryStore):
    """A memory store that notes its writes: ``(method, messages, events)``."""

    writes: list[tuple[str, int, int]] = attrs.field(factory=list)

    @property
    def writes_in_step(self) -> bool:
        return False  # its append_turn is what the test counts: the run's turns go through it

    async def append_messages(self, thread_id: str, messages: Sequence[Any]) -> None:
        self.writes.append(("append_messages", len(messages), 0))
        await super().append_messages(thread_id, messages)

    async def append_events(self, run_id: str, events: Sequence[Any]) -> None:
        self.writes.append(("append_events", 0, len(events)))
        await super().append_events(run_id, events)

    async def append_turn(
        self, thread_id: str, run_id: str, messages: Sequence[Any], events: Sequence[Any], **finish: Any
    ) -> None:
        self.writes.append(("append_turn", len(messages), len(events)))
        await super().append_turn(thread_id, run_id, messages, events, **finish)


async def test_a_run_writes_each_turn_with_its_events_in_one_store_call() -> None:
    store = CountingStore()
    with trio.fail_after(GUARD):
        async with open_runtime(config(), models={"m": FunctionModel(echo_then_answer)}, store=store) as runtime:
            result = await runtime.run("a", "北京今天适合穿什么?", thread_id="t")
    assert result.outcome is Outcome.ANSWERED
    assert {method for method, _, _ in store.writes} == {"append_turn"}
    # Two turns (the call with its tool message, the answer) and the terminal event: three writes at most
    # (the writer may take both turns at once), each turn with the events queued before it.
    assert len(store.writes) <= 3
    assert sum(m for _, m, _ in store.writes) == 3
    assert all(e for _, m, e in store.writes if m)
    assert sum(e for _, _, e in store.writes) == len(result.events)
    assert await store.read_events(result.run_id) == list(result.events)


async def test_a_store_out_of_reach_ends_runs_with_store_unavailable_and_nothing_half_written() -> None:
    store = FlakyStore()
    calls = 0

    def script(messages: Sequence[dict[str, Any]], tools: object) -> Completion | str:
        nonlocal calls
        calls += 1
        if messages[-1]["role"] == "tool":
            return "answer"
        store.down = calls == 3  # the store goes down while the second run's tool runs
        return Completion(tool_calls=(ToolCall("c1", "test__echo", '{"text": "x"}'),))

    with trio.fail_after(GUARD):
        async with open_runtime(config(), models={"m": FunctionModel(script)}, store=store) as runtime:
            ok = await runtime.run("a", "one", thread_id="t")
            failed = await runtime.run("a", "two", thread_id="t")
            refused = await runtime.run("a", "three", thread_id="t")  # still down at its start
            store.down = False
            history_then = await store.load_history("t")
            back = await runtime.run("a", "four", thread_id="t")
            in_memory = runtime.conversations.history("t")
    assert ok.outcome is Outcome.ANSWERED
    assert (failed.outcome, failed.code) == (Outcome.ERROR, RunErrorCode.STORE_UNAVAILABLE)
    assert failed.error == "the conversation store is unavailable"  # what the store said goes to the log only
    assert failed.events[-1]["code"] == "store_unavailable"
    assert refused.code is RunErrorCode.STORE_UNAVAILABLE
    # The failed run's input was stored at its start; its turn was not, and nothing of it dangles.
    assert [m["role"] for m in history_then] == ["user", "assistant", "tool", "assistant", "user"]
    assert back.outcome is Outcome.ANSWERED
    assert [m.get("content") for m in in_memory if m["role"] == "user"] == ["one", "two", "four"]
