"""Bounded conversation memory (issue 9, item 9): per-thread trimming by whole turns, LRU eviction of idle threads."""

from __future__ import annotations

import gc
import json
import sys
import textwrap
from typing import Any

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_conversation import call, open_weather_manager, scripted, text_reply, tools_reply
from yao_actors.config import AssistantSpec, Config, ServiceSpec
from yao_actors.conversation.durable.journal import RunJournal
from yao_actors.conversation.loop.run import Run
from yao_actors.errors import RunErrorCode
from yao_actors.events import Outcome, RunEvents, stored_events
from yao_actors.history_budget import (
    VALUE_OVERHEAD,
    BoundedHistory,
    idle_threads_to_forget,
    keep_from,
    message_bytes,
    turn_starts,
)
from yao_actors.runtime import open_runtime
from yao_actors.store import MemoryStore, RunStatus, ThreadKeeper
from yao_actors.testing import FunctionModel


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def tool_turn(question: str, n_calls: int, result: str = "r") -> list[dict[str, Any]]:
    """A turn: the question, an assistant message with ``n_calls`` calls, their tool messages, an answer."""
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "t", "arguments": "{}"}} for i in range(n_calls)]
    return [
        user(question),
        {"role": "assistant", "content": "", "tool_calls": calls},
        *({"role": "tool", "tool_call_id": f"c{i}", "content": result} for i in range(n_calls)),
        {"role": "assistant", "content": "answer"},
    ]


def test_message_bytes_counts_utf8_text_and_values() -> None:
    assert message_bytes("abc") == VALUE_OVERHEAD + 3
    assert message_bytes("é") == VALUE_OVERHEAD + 2
    assert message_bytes("\ud800") == VALUE_OVERHEAD + 3
    assert message_bytes({"role": "user"}) == 3 * VALUE_OVERHEAD + 4 + 4
    deep: Any = "x"
    for _ in range(100_000):  # no recursion: any depth is measured
        deep = [deep]
    assert message_bytes(deep) == 100_001 * VALUE_OVERHEAD + 1


def test_turns_start_at_user_messages() -> None:
    history = [*tool_turn("q1", 2), *tool_turn("q2", 1)]
    assert turn_starts(history) == [0, 5]
    assert turn_starts([{"role": "system", "content": "s"}, user("q")]) == [0, 1]


def test_oldest_whole_turns_are_dropped() -> None:
    history = BoundedHistory(limit=10_000)
    for i in range(50):
        history.extend(tool_turn(f"q{i}", 3, result="x" * 100))
    assert history.bytes <= 10_000
    assert history.bytes == sum(map(message_bytes, history.messages))
    assert history.messages[0] == user(history.messages[0]["content"])
    assert history.messages[-6:] == tool_turn("q49", 3, result="x" * 100)


def test_a_turn_larger_than_the_budget_is_not_kept() -> None:
    history = BoundedHistory(limit=1000)
    history.extend(tool_turn("small", 1))
    dropped = history.extend([user("x" * 2000), {"role": "assistant", "content": "ok"}])
    assert (history.messages, history.bytes, dropped) == ([], 0, 6)


_turns = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 400)), min_size=1, max_size=30)


@settings(max_examples=200, deadline=None)
@given(_turns, st.integers(100, 5000))
def test_trimming_keeps_the_newest_whole_turns_that_fit(turns: list[tuple[int, int]], limit: int) -> None:
    history = BoundedHistory(limit=limit)
    everything: list[dict[str, Any]] = []
    for i, (n_calls, size) in enumerate(turns):
        turn = tool_turn(f"q{i}", n_calls, result="r" * size)
        everything.extend(turn)
        history.extend(turn)
        assert history.bytes <= limit
    kept = history.messages
    assert kept == everything[len(everything) - len(kept) :]  # a suffix of the conversation
    if kept:
        assert kept[0]["role"] == "user"  # whole turns: tool calls never lose their answers
    cut = keep_from(everything, [message_bytes(m) for m in everything], limit)
    assert len(everything) - cut == len(kept)


def test_idle_threads_are_forgotten_oldest_first_and_no_more_than_needed() -> None:
    threads = [("a", 100, True), ("b", 100, False), ("c", 100, True), ("d", 100, True)]
    assert idle_threads_to_forget(threads, 400) == []
    assert idle_threads_to_forget(threads, 250) == ["a", "c"]  # "b" is busy: it counts, but stays
    assert idle_threads_to_forget(threads, 0) == ["a", "c", "d"]


# --------------------------------------------------------------------------- the manager


async def test_a_thread_keeps_only_its_newest_turns_and_the_model_sees_those() -> None:
    replies = []
    for i in range(20):
        replies += [tools_reply(call("w__get", {"city": f"c{i}"})), text_reply(f"answer {i} " + "z" * 300)]
    model = scripted(*replies)
    with trio.fail_after(30):
        async with open_weather_manager(model, limits={"max_thread_bytes": 4000}) as manager:
            for i in range(20):
                await manager.run("a", f"question {i} " + "q" * 300, thread_id="t")
            handle = await manager.thread("t")
            history = handle.history
    assert handle.history_bytes <= 4000
    assert history[0]["role"] == "user"
    assert history[-1]["content"].startswith("answer 19")
    assert 2 <= [m["role"] for m in history].count("user") < 20
    last_request = model.calls[-1].messages
    assert not any("question 0 " in str(m.get("content")) for m in last_request)


async def test_least_recently_used_idle_threads_are_forgotten_past_the_total_budget() -> None:
    model = scripted(*(text_reply("ok") for _ in range(5)))
    with trio.fail_after(30):
        # two threads of ~1,200 bytes, and a little more
        async with open_weather_manager(model, limits={"max_threads_bytes": 2700}) as manager:
            for thread_id in ("t1", "t2", "t3"):
                await manager.run("a", "x" * 1000, thread_id=thread_id)
            assert manager.history("t1") == ()  # the oldest was forgotten
            assert len(manager.history("t2")) == len(manager.history("t3")) == 2
            await manager.run("a", "y" * 10, thread_id="t2")  # t2 becomes the most recently used
            await manager.run("a", "x" * 1000, thread_id="t4")
            assert manager.history("t3") == ()  # the least recently used, though newer than t2
            assert len(manager.history("t2")) == 4
            assert len(manager.history("t4")) == 2


_MEASURE = textwrap.dedent(
    """
    import json, os, sys, trio
    from yao_actors.config import AssistantSpec, Config
    from yao_actors.runtime import open_runtime
    from yao_actors.testing import FunctionModel

    PAGE = os.sysconf("SC_PAGE_SIZE")

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * PAGE

    async def main() -> None:
        config = Config(assistants={"a": AssistantSpec(id="a", model="m")})
        model = FunctionModel(lambda messages, tools: "ok")
        async with open_runtime(config, models={"m": model}) as runtime:
            for i in range(105):
                if i == 5:
                    before = rss()  # after a warm-up, as the issue's service measurement
                await runtime.run("a", str(i) + "x" * 1_000_000, thread_id="t")
                model.calls.clear()
            after = rss()
            kept = (await runtime.conversations.thread("t")).history_bytes
        print(json.dumps({"growth": after - before, "kept": kept}))

    trio.run(main)
    """
)


async def test_a_hundred_one_megabyte_runs_on_one_thread_grow_the_process_little() -> None:
    with trio.fail_after(300):
        done = await trio.run_process([sys.executable, "-c", _MEASURE], capture_stdout=True, capture_stderr=True)
    figures = json.loads(done.stdout)
    assert figures["kept"] <= 4 << 20
    assert figures["growth"] < 20 << 20, f"RSS grew by {figures['growth'] / 2**20:.1f} MB"


async def test_a_finished_run_is_freed_without_the_cycle_collector() -> None:
    # A run that stays in a reference cycle keeps its messages (and the history it saw) alive until the next
    # full collection, long after the thread's history dropped them: the RSS test above grew by 24-42 MB so.
    model = scripted(*(text_reply("好的") for _ in range(3)))
    gc.collect()
    gc.disable()
    try:
        async with open_weather_manager(model) as manager:
            for i in range(3):
                await manager.run("a", f"北京今天适合穿什么? {i}", thread_id="t")
            gc.set_debug(gc.DEBUG_SAVEALL)
            gc.collect()
            left = [type(o).__name__ for o in gc.garbage if isinstance(o, Run | RunJournal | RunEvents)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert left == []


async def test_the_runtime_takes_the_budgets_from_the_server_section() -> None:
    service = ServiceSpec(max_thread_bytes=1234, max_threads_bytes=5678)
    async with open_runtime(Config(service=service)) as runtime:
        kept = runtime.conversations._threads
        assert (kept.max_thread_bytes, kept.max_threads_bytes) == (1234, 5678)
    async with open_runtime(Config()) as runtime:  # embedding without a config file: the same defaults
        kept = runtime.conversations._threads
        assert (kept.max_thread_bytes, kept.max_threads_bytes) == (4 << 20, 256 << 20)


async def test_a_thread_the_store_forgets_starts_anew_in_its_next_run() -> None:
    # The runtime's memory store and its conversations keep the same budget, but forget by different
    # recency (last written, last used): a thread used without being written (a refused run) stayed in
    # memory while the store forgot it, and its next run ended with store_unavailable.
    seen: list[int] = []

    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        seen.append(sum(1 for m in messages if m["role"] != "system"))
        return "今天适合穿薄外套。" + "x" * 200

    config = Config(assistants={"a": AssistantSpec(id="a", model="m")}, service=ServiceSpec(max_threads_bytes=1500))
    async with open_runtime(config, models={"m": FunctionModel(answer, stream=False)}) as runtime:
        for thread_id in ("A", "B"):
            assert (await runtime.run("a", "北京今天适合穿什么?", thread_id=thread_id)).outcome is Outcome.ANSWERED
        refused = await runtime.run("a", [{"role": "tool", "tool_call_id": "nope", "content": "x"}], thread_id="A")
        assert refused.code is RunErrorCode.BAD_REQUEST  # A is now the most recently used, but not written
        await runtime.run("a", "y" * 600, thread_id="C")  # over the budget: the store forgets A, the oldest written
        assert await runtime.conversations.store.get_thread("A") is None
        assert runtime.conversations.history("A") == ()  # and the conversations forgot it with the store
        seen.clear()
        again = await runtime.run("a", "北京今天适合穿什么?", thread_id="A")
    assert again.outcome is Outcome.ANSWERED, again.error
    assert seen == [1]  # a new thread: the question alone


async def test_the_memory_store_keeps_what_a_keeper_keeps_and_tells_every_keeper_what_it_forgets() -> None:
    dropped: dict[str, list[str]] = {"first": [], "second": []}
    store = MemoryStore(max_threads_bytes=300)
    store.keepers.append(ThreadKeeper(lambda thread_id: thread_id == "A", dropped["first"].append))
    store.keepers.append(ThreadKeeper(lambda thread_id: False, dropped["second"].append))
    for thread_id in ("A", "B", "C"):
        await store.open_thread(thread_id, None)
        await store.append_messages(thread_id, [user("x" * 120)])
    assert await store.get_thread("A") is not None  # the oldest, but one keeper keeps it
    assert await store.get_thread("B") is None  # forgotten in its place
    assert dropped == {"first": ["B"], "second": ["B"]}  # and each keeper was told, to drop its copy


async def _run_with_events(store: MemoryStore, thread_id: str, run_id: str, size: int, *, finish: bool = True) -> None:
    """A run on ``thread_id`` whose log holds one event of about ``size`` bytes."""
    await store.open_thread(thread_id, None)
    await store.start_run(thread_id, run_id, "a", [user("go")])
    await store.append_events(run_id, stored_events([{"type": "TEXT_MESSAGE_CONTENT", "delta": "x" * size, "seq": 1}]))
    if finish:
        await store.finish_run(run_id, status=RunStatus.FINISHED, outcome="answered")


async def test_the_memory_store_keeps_a_threads_event_logs_within_its_budget() -> None:
    """Event logs were kept for ``event_ttl`` (a day) whatever their size: 1 MB runs on one thread grew the
    service by their events (issue 29 defect 3). A thread's logs now fit ``max_thread_bytes``: the oldest finished
    runs' logs go first; a run in progress keeps its log, and so does the run being written."""
    store = MemoryStore(max_thread_bytes=1000)
    await _run_with_events(store, "t", "r1", 400)
    await _run_with_events(store, "t", "r2", 400, finish=False)  # in progress
    await _run_with_events(store, "u", "u1", 900)  # another thread: its own budget
    await _run_with_events(store, "t", "r3", 400)
    assert [len(await store.read_events(r)) for r in ("r1", "r2", "r3", "u1")] == [0, 1, 1, 1]
    await _run_with_events(store, "t", "r4", 2000)  # over the budget alone: the run being written keeps its log
    assert [len(await store.read_events(r)) for r in ("r2", "r3", "r4")] == [1, 0, 1]
    assert await store.get_run("r1") is not None  # the run stays; only its log goes, as when it expires


async def test_the_memory_store_keeps_all_event_logs_within_its_budget() -> None:
    store = MemoryStore(max_thread_bytes=10_000, max_threads_bytes=2500)
    for n in range(5):
        await _run_with_events(store, f"t{n}", f"r{n}", 900)
    assert [len(await store.read_events(f"r{n}")) for n in range(5)] == [0, 0, 0, 1, 1]
    await store.forget_thread("t4")  # a forgotten thread's logs leave the budget too
    await _run_with_events(store, "t5", "r5", 900)
    assert [len(await store.read_events(f"r{n}")) for n in (3, 5)] == [1, 1]


async def test_a_thread_being_loaded_is_not_forgotten_under_it() -> None:
    # While a thread is being loaded (the store's calls await), it is in no one's memory yet: the store asks
    # and the manager keeps it, so the run that loads it does not find it gone at its start.
    loading, go_on = trio.Event(), trio.Event()

    class HeldLoads(MemoryStore):
        async def load_history(self, thread_id: str) -> list[dict[str, Any]]:
            loading.set()
            await go_on.wait()
            return await super().load_history(thread_id)

    config = Config(assistants={"a": AssistantSpec(id="a", model="m")}, service=ServiceSpec(max_threads_bytes=1500))
    model = FunctionModel(lambda messages, tools: "今天适合穿薄外套。", stream=False)
    async with open_runtime(config, models={"m": model}, store=HeldLoads(max_threads_bytes=1500)) as runtime:
        for thread_id in ("A", "C"):
            await runtime.run("a", "北京今天适合穿什么?", thread_id=thread_id)
        runtime.conversations.close_thread("A")  # out of memory, still in the store (the oldest written)
        results = []

        async def run_a() -> None:
            results.append(await runtime.run("a", "还要带伞吗?", thread_id="A"))

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run_a)
                await loading.wait()  # A is being loaded
                await runtime.run("a", "y" * 1200, thread_id="C")  # C is in memory: over the budget now
                go_on.set()
    assert results[0].outcome is Outcome.ANSWERED, results[0].error
    assert len(results[0].events) > 0
