"""Dispatch of a model turn's tool calls against in-memory server handles."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.dispatch_support import catalog_of, scripted_server, serving, tool
from yao_actors.errors import ErrorKind
from yao_actors.models.base import ToolCall
from yao_actors.tools.dispatch import (
    CallFinished,
    CallProgress,
    CallStarted,
    DispatchEvent,
    SequentialRetry,
    collect_tool_calls,
    execute_tool_calls,
)

CITY: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string", "enum": ["Beijing", "Shanghai"]}},
    "required": ["city"],
}


def call(call_id: str, name: str, arguments: str = "{}") -> ToolCall:
    return ToolCall(call_id, name, arguments)


class Recorder:
    """An ``on_event`` callback that keeps what it saw, with the (virtual) time."""

    def __init__(self) -> None:
        self.events: list[tuple[float, DispatchEvent]] = []

    async def __call__(self, event: DispatchEvent) -> None:
        self.events.append((trio.current_time(), event))

    def of(self, kind: type[Any]) -> list[Any]:
        return [event for _, event in self.events if isinstance(event, kind)]


async def test_no_calls_give_no_results() -> None:
    a = scripted_server("a")
    async with serving(a) as servers:
        assert await collect_tool_calls([], await catalog_of(servers), servers) == []


@pytest.mark.parametrize("echoes", [1, 3])
async def test_each_result_comes_back_once_as_its_event(echoes: int) -> None:
    """One way back: a ``CallFinished`` per call (by position, duplicate ids apart, a refused call too), nothing
    returned; one call alone takes the batch's short path, several the nursery's."""
    a = scripted_server("a")
    batch = [call("same", "a__echo", f'{{"n": {n}}}') for n in range(echoes)]
    if echoes > 1:
        batch.append(call("bad", "a__nope"))
    recorder = Recorder()
    async with serving(a) as servers:
        told = await execute_tool_calls(batch, await catalog_of(servers), servers, on_event=recorder)  # type: ignore[func-returns-value]
    assert told is None
    finished = sorted(recorder.of(CallFinished), key=lambda e: e.index)
    assert [e.index for e in finished] == list(range(len(batch)))
    assert [e.result.call_id for e in finished] == [c.id for c in batch]
    assert [e.result.result for e in finished[:echoes]] == [{"n": n} for n in range(echoes)]
    assert [e.result.kind for e in finished[echoes:]] == ([ErrorKind.UNKNOWN_TOOL] if echoes > 1 else [])


async def test_a_single_call_runs_and_carries_its_identity() -> None:
    a = scripted_server("a")
    async with serving(a) as servers:
        (result,) = await collect_tool_calls([call("c1", "a__echo", '{"x": 1}')], await catalog_of(servers), servers)
        assert (result.call_id, result.name, result.server, result.tool) == ("c1", "a__echo", "a", "echo")
        assert result.arguments == '{"x": 1}'
        assert result.result == {"x": 1}
        assert result.ok
        assert a.log == [("echo", {"x": 1})]


async def test_empty_arguments_are_sent_as_an_empty_object() -> None:
    a = scripted_server("a")
    async with serving(a) as servers:
        await collect_tool_calls([call("c1", "a__echo", "")], await catalog_of(servers), servers)
        assert a.log == [("echo", {})]


@pytest.mark.parametrize("several", [False, True])
async def test_a_hallucinated_name_gets_a_retryable_unknown_tool_result(several: bool) -> None:
    a = scripted_server("a")
    calls = [call("c1", "zzz__t")] + ([call("c2", "a__echo")] if several else [])
    async with serving(a) as servers:
        results = await collect_tool_calls(calls, await catalog_of(servers), servers)
        assert results[0].kind is ErrorKind.UNKNOWN_TOOL
        assert results[0].retryable
        assert results[0].error is not None
        assert "'zzz__t'" in results[0].error
        assert "a__echo" in results[0].error
        assert (results[0].server, results[0].tool) == ("", "")
        assert [r.ok for r in results[1:]] == [True] * (len(calls) - 1)


@pytest.mark.parametrize("several", [False, True])
@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ("[1]", "arguments must be a JSON object, got array"),
        ('{"city": "Paris"}', "city: 'Paris' is not one of ['Beijing', 'Shanghai']"),
        ('{"town": "Pa', "'city' is a required property"),
        ("not json", "not valid JSON"),
        ("", "'city' is a required property"),
    ],
)
async def test_bad_arguments_get_their_own_result_in_every_path(arguments: str, fragment: str, several: bool) -> None:
    a = scripted_server("a", [tool("get", CITY), tool("echo")])
    calls = [call("c1", "a__get", arguments)] + ([call("c2", "a__echo")] if several else [])
    async with serving(a) as servers:
        results = await collect_tool_calls(calls, await catalog_of(servers), servers)
        assert len(results) == len(calls)
        assert results[0].kind is ErrorKind.INVALID_ARGUMENTS
        assert results[0].retryable
        assert results[0].error is not None
        assert fragment in results[0].error
        assert a.executions["get"] == 0
        assert [r.ok for r in results[1:]] == [True] * (len(calls) - 1)


async def test_repaired_arguments_are_marked() -> None:
    a = scripted_server("a", [tool("get", CITY)])
    async with serving(a) as servers:
        (result,) = await collect_tool_calls(
            [call("c1", "a__get", '{"city": "Beijing"')], await catalog_of(servers), servers
        )
        assert result.ok
        assert result.repaired
        assert a.log == [("get", {"city": "Beijing"})]


async def test_a_tool_error_is_a_result_with_retryability_from_its_own_text() -> None:
    a = scripted_server("a")
    calls = [
        call("c1", "a__fail", '{"message": "bad input"}'),
        call("c2", "a__fail", '{"message": "upstream timeout"}'),
    ]
    async with serving(a) as servers:
        results = await collect_tool_calls(calls, await catalog_of(servers), servers, mode="sequential")
        assert [(r.kind, r.retryable) for r in results] == [(ErrorKind.TOOL_ERROR, True), (ErrorKind.TOOL_ERROR, False)]
        assert results[0].error == "bad input"


async def test_a_server_that_is_not_running_gets_server_unavailable() -> None:
    a = scripted_server("a")
    async with serving(a) as servers:
        catalog = await catalog_of(servers)
        (result,) = await collect_tool_calls([call("c1", "a__echo")], catalog, {})
        assert result.kind is ErrorKind.SERVER_UNAVAILABLE
        assert not result.retryable


async def test_multi_server_batch_runs_all_groups_at_once_in_call_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    a, b, c = scripted_server("a"), scripted_server("b"), scripted_server("c")
    calls = [
        call("1", "b__sleep", '{"seconds": 3}'),
        call("2", "a__sleep", '{"seconds": 1}'),
        call("3", "c__sleep", '{"seconds": 2}'),
        call("4", "a__sleep", '{"seconds": 2}'),
        call("5", "b__echo", '{"n": 5}'),
    ]
    start = trio.current_time()
    async with serving(a, b, c) as servers:
        results = await collect_tool_calls(calls, await catalog_of(servers), servers)
        assert trio.current_time() - start == pytest.approx(3)
        assert [r.call_id for r in results] == ["1", "2", "3", "4", "5"]
        assert [r.server for r in results] == ["b", "a", "c", "a", "b"]
        assert all(r.ok for r in results)
        assert [r.duration for r in results] == pytest.approx([3, 1, 2, 2, 0])


async def test_global_sequential_mode_runs_one_call_after_another(autojump_clock: trio.testing.MockClock) -> None:
    a, b = scripted_server("a"), scripted_server("b")
    calls = [call(str(i), f"{'ab'[i % 2]}__sleep", '{"seconds": 1}') for i in range(4)]
    recorder = Recorder()
    start = trio.current_time()
    async with serving(a, b) as servers:
        await collect_tool_calls(calls, await catalog_of(servers), servers, mode="sequential", on_event=recorder)
        assert trio.current_time() - start == pytest.approx(4)
        assert [e.call.id for e in recorder.of(CallStarted)] == ["0", "1", "2", "3"]
        assert max(a.max_in_flight, b.max_in_flight) == 1


async def test_max_concurrency_bounds_a_group(autojump_clock: trio.testing.MockClock) -> None:
    a = scripted_server("a", max_concurrency=3)
    calls = [call(str(i), "a__sleep", '{"seconds": 1}') for i in range(7)]
    start = trio.current_time()
    async with serving(a) as servers:
        results = await collect_tool_calls(calls, await catalog_of(servers), servers)
        assert a.max_in_flight == 3
        assert trio.current_time() - start == pytest.approx(3)
        assert all(r.ok for r in results)


async def test_a_sequential_server_runs_its_calls_one_by_one_while_others_run_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    a = scripted_server("a", dispatch="sequential")
    b = scripted_server("b")
    calls = [call(f"a{i}", "a__sleep", '{"seconds": 1}') for i in range(3)]
    calls += [call(f"b{i}", "b__sleep", '{"seconds": 1}') for i in range(3)]
    start = trio.current_time()
    async with serving(a, b) as servers:
        await collect_tool_calls(calls, await catalog_of(servers), servers)
        assert trio.current_time() - start == pytest.approx(3)
        assert (a.max_in_flight, b.max_in_flight) == (1, 3)


async def test_one_slow_call_times_out_alone(autojump_clock: trio.testing.MockClock) -> None:
    a = scripted_server("a", timeout=5)
    b = scripted_server("b", timeout=5)
    calls = [
        call("fast1", "a__sleep", '{"seconds": 1}'),
        call("slow", "a__sleep", '{"seconds": 60}'),
        call("fast2", "b__sleep", '{"seconds": 2}'),
    ]
    async with serving(a, b) as servers:
        results = await collect_tool_calls(calls, await catalog_of(servers), servers)
        assert [r.kind for r in results] == [None, ErrorKind.TIMEOUT, None]
        assert not results[1].retryable
        assert results[1].duration == pytest.approx(5)
        await trio.testing.wait_all_tasks_blocked()  # the server hears of the cancellation
        assert a.cancelled == ["sleep"]


async def test_the_batch_deadline_turns_unfinished_calls_into_timeouts(autojump_clock: trio.testing.MockClock) -> None:
    a = scripted_server("a", max_concurrency=1)
    b = scripted_server("b")
    calls = [
        call("done", "a__sleep", '{"seconds": 1}'),
        call("running", "a__sleep", '{"seconds": 10}'),
        call("queued", "a__sleep", '{"seconds": 1}'),
        call("other", "b__sleep", '{"seconds": 30}'),
        call("bad", "b__nope"),
    ]
    recorder = Recorder()
    start = trio.current_time()
    async with serving(a, b) as servers:
        results = await collect_tool_calls(
            calls, await catalog_of(servers), servers, batch_timeout=4, on_event=recorder
        )
        assert trio.current_time() - start == pytest.approx(4)
        assert [r.call_id for r in results] == ["done", "running", "queued", "other", "bad"]
        assert [r.kind for r in results] == [
            None,
            ErrorKind.TIMEOUT,
            ErrorKind.TIMEOUT,
            ErrorKind.TIMEOUT,
            ErrorKind.UNKNOWN_TOOL,
        ]
        assert [r.duration for r in results[1:4]] == pytest.approx([3, 0, 4])
        await trio.testing.wait_all_tasks_blocked()  # the server hears of the cancellation
        assert sorted(a.cancelled + b.cancelled) == ["sleep", "sleep"]
        assert sorted(e.result.call_id for e in recorder.of(CallFinished)) == sorted(r.call_id for r in results)


@pytest.mark.parametrize(
    ("server_timeout", "batch_timeout", "expected"),
    [
        (5, 20, "timed out after 5s"),  # the call's own deadline comes first
        (20, 5, "the batch deadline expired"),  # the batch's comes first
        (5, 5, "timed out after 5s"),  # together: the call's own, as when its scope was inside the batch's
    ],
)
async def test_a_single_call_reports_the_deadline_that_expired(
    autojump_clock: trio.testing.MockClock, server_timeout: float, batch_timeout: float, expected: str
) -> None:
    # A batch of one call runs under one cancel scope (the handle's) for both deadlines.
    a = scripted_server("a", timeout=server_timeout)
    recorder = Recorder()
    start = trio.current_time()
    async with serving(a) as servers:
        catalog = await catalog_of(servers)
        (cut,) = await collect_tool_calls(
            [call("1", "a__sleep", '{"seconds": 60}')], catalog, servers, batch_timeout=batch_timeout, on_event=recorder
        )
        assert trio.current_time() - start == pytest.approx(min(server_timeout, batch_timeout))
        assert cut.kind is ErrorKind.TIMEOUT
        assert expected in (cut.error or "")
        assert cut.duration == pytest.approx(min(server_timeout, batch_timeout))
        assert [e.result for e in recorder.of(CallFinished)] == [cut]
        await trio.testing.wait_all_tasks_blocked()  # the server hears of the cancellation
        assert a.cancelled == ["sleep"]
        # and serves the next call
        (nxt,) = await collect_tool_calls([call("2", "a__echo", '{"n": 2}')], catalog, servers, batch_timeout=5)
        assert nxt.result == {"n": 2}


async def test_a_cancelled_single_call_tells_the_server_to_cancel(autojump_clock: trio.testing.MockClock) -> None:
    a = scripted_server("a", timeout=100)
    async with serving(a) as servers:
        catalog = await catalog_of(servers)
        with trio.move_on_after(3) as caller:
            await collect_tool_calls([call("1", "a__sleep", '{"seconds": 60}')], catalog, servers, batch_timeout=50)
        assert caller.cancelled_caught  # the caller's cancellation passes through, it is no result
        await trio.testing.wait_all_tasks_blocked()
        assert a.cancelled == ["sleep"]


@pytest.mark.parametrize("servers", [1, 2])
async def test_a_listener_holding_results_past_the_batch_deadline_still_takes_each_once(
    autojump_clock: trio.testing.MockClock, servers: int
) -> None:
    taken: list[str] = []

    async def slow(event: DispatchEvent) -> None:
        if isinstance(event, CallFinished):
            await trio.sleep(10)  # past the batch deadline
            taken.append(event.result.call_id)

    a, b = scripted_server("a"), scripted_server("b")
    calls = [call("1", "a__echo", '{"n": 1}'), call("2", "b__echo" if servers == 2 else "a__echo", '{"n": 2}')]
    async with serving(a, b) as served:
        results = await collect_tool_calls(calls, await catalog_of(served), served, batch_timeout=5, on_event=slow)
    assert [r.result for r in results] == [{"n": 1}, {"n": 2}]  # the calls finished before the deadline
    assert sorted(taken) == ["1", "2"]


async def test_after_a_deadline_the_server_answers_the_next_call(autojump_clock: trio.testing.MockClock) -> None:
    a = scripted_server("a")
    async with serving(a) as servers:
        catalog = await catalog_of(servers)
        (cut,) = await collect_tool_calls([call("1", "a__sleep", '{"seconds": 9}')], catalog, servers, batch_timeout=1)
        assert cut.kind is ErrorKind.TIMEOUT
        (nxt,) = await collect_tool_calls([call("2", "a__echo", '{"again": true}')], catalog, servers)
        assert nxt.result == {"again": True}


async def test_the_sequential_retry_reruns_only_the_failed_call() -> None:
    a = scripted_server("a")
    b = scripted_server("b")
    calls = [
        call("ok", "a__echo", '{"n": 1}'),
        call("flaky", "a__flaky"),
        call("hard", "a__fail", '{"message": "connection refused"}'),
        call("other", "b__flaky"),
    ]
    recorder = Recorder()
    async with serving(a, b) as servers:
        results = await collect_tool_calls(calls, await catalog_of(servers), servers, on_event=recorder)
        assert a.executions == {"echo": 1, "flaky": 2, "fail": 1}
        assert b.executions == {"flaky": 1}
        assert [r.ok for r in results] == [True, True, False, False]
        assert [r.sequential_retry for r in results] == [False, True, False, False]
        assert results[1].result == {"attempt": 2}
        assert recorder.of(SequentialRetry) == [SequentialRetry(("flaky",), (1,))]
        finished = [e.result.call_id for e in recorder.of(CallFinished)]
        assert sorted(finished) == ["flaky", "hard", "ok", "other"]


async def test_a_retry_that_fails_again_is_final() -> None:
    a = scripted_server("a")
    calls = [call("1", "a__fail"), call("2", "a__fail")]
    async with serving(a) as servers:
        results = await collect_tool_calls(calls, await catalog_of(servers), servers)
        assert a.executions["fail"] == 4
        assert all(r.sequential_retry and r.kind is ErrorKind.TOOL_ERROR for r in results)


async def test_no_retry_for_a_group_that_did_not_run_concurrently() -> None:
    solo = scripted_server("solo")
    seq = scripted_server("seq", dispatch="sequential")
    calls = [call("1", "solo__flaky"), call("2", "seq__flaky"), call("3", "seq__echo")]
    async with serving(solo, seq) as servers:
        results = await collect_tool_calls(calls, await catalog_of(servers), servers)
        assert (solo.executions["flaky"], seq.executions["flaky"]) == (1, 1)
        assert [r.kind for r in results] == [ErrorKind.TOOL_ERROR, ErrorKind.TOOL_ERROR, None]


async def test_duplicate_and_empty_ids_do_not_collapse() -> None:
    a = scripted_server("a")
    calls = [call("", "a__echo", '{"n": 1}'), call("", "a__echo", '{"n": 2}'), call("x", "a__echo", '{"n": 3}')]
    calls.append(call("x", "a__echo", '{"n": 4}'))
    recorder = Recorder()
    async with serving(a) as servers:
        results = await collect_tool_calls(calls, await catalog_of(servers), servers, on_event=recorder)
        assert [r.result for r in results] == [{"n": 1}, {"n": 2}, {"n": 3}, {"n": 4}]
        assert [r.arguments for r in results] == [c.arguments for c in calls]
        assert sorted(e.index for e in recorder.of(CallFinished)) == [0, 1, 2, 3]


async def test_events_report_start_progress_and_finish_as_they_happen(
    autojump_clock: trio.testing.MockClock,
) -> None:
    a = scripted_server("a")
    calls = [call("p", "a__progress", '{"steps": 2}'), call("s", "a__sleep", '{"seconds": 5}')]
    recorder = Recorder()
    async with serving(a) as servers:
        await collect_tool_calls(calls, await catalog_of(servers), servers, on_event=recorder)
        started = recorder.of(CallStarted)
        assert sorted((e.call.id, e.server, e.tool, e.index) for e in started) == [
            ("p", "a", "progress", 0),
            ("s", "a", "sleep", 1),
        ]
        progress = recorder.of(CallProgress)
        assert [(e.call.id, e.progress, e.total, e.message) for e in progress] == [
            ("p", 1.0, 2.0, "step 1"),
            ("p", 2.0, 2.0, "step 2"),
        ]
        finish_times = {event.result.call_id: at for at, event in recorder.events if isinstance(event, CallFinished)}
        assert finish_times["p"] < finish_times["s"]


async def test_a_failing_sibling_never_cancels_the_others(autojump_clock: trio.testing.MockClock) -> None:
    a = scripted_server("a")
    b = scripted_server("b")
    async with serving(a, b) as servers:
        catalog = await catalog_of(servers)
        await b.go_down()
        calls = [call("1", "b__echo"), call("2", "a__sleep", '{"seconds": 2}'), call("3", "a__fail")]
        results = await collect_tool_calls(calls, catalog, servers)
        assert [r.kind for r in results] == [ErrorKind.SERVER_UNAVAILABLE, None, ErrorKind.TOOL_ERROR]


async def test_cancelling_the_caller_propagates_and_cancels_the_calls(autojump_clock: trio.testing.MockClock) -> None:
    a = scripted_server("a")
    recorder = Recorder()
    calls = [call("1", "a__sleep", '{"seconds": 10}'), call("2", "a__echo")]
    async with serving(a) as servers:
        catalog = await catalog_of(servers)
        with trio.move_on_after(1) as scope:
            await collect_tool_calls(calls, catalog, servers, on_event=recorder)
        assert scope.cancelled_caught
        await trio.testing.wait_all_tasks_blocked()  # the server hears of the cancellation
        assert a.cancelled == ["sleep"]
        assert [e.result.call_id for e in recorder.of(CallFinished)] == ["2"]


KINDS = st.sampled_from(["ok", "fail", "flaky", "bad_args", "unknown", "slow", "down"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(KINDS, st.sampled_from(["a", "b"]), st.sampled_from(["", "x", "y"])), max_size=12))
def test_every_call_gets_exactly_one_result_in_order(batch: list[tuple[str, str, str]]) -> None:
    names = {
        "ok": "echo",
        "fail": "fail",
        "flaky": "flaky",
        "bad_args": "get",
        "unknown": "nope",
        "slow": "sleep",
        "down": "echo",
    }
    arguments = {"bad_args": '{"city": 1}', "slow": '{"seconds": 100}'}
    calls = [
        ToolCall(call_id, f"{'c' if kind == 'down' else server}__{names[kind]}", arguments.get(kind, "{}"))
        for kind, server, call_id in batch
    ]

    async def main() -> None:
        tools = [tool("echo"), tool("fail"), tool("flaky"), tool("sleep"), tool("get", CITY)]
        a, b, c = (scripted_server(s, tools, timeout=10) for s in "abc")
        async with serving(a, b, c) as servers:
            catalog = await catalog_of(servers)
            await c.go_down()
            events: list[DispatchEvent] = []

            async def on_event(event: DispatchEvent) -> None:
                events.append(event)

            results = await collect_tool_calls(calls, catalog, servers, batch_timeout=50, on_event=on_event)
            assert [(r.call_id, r.name, r.arguments) for r in results] == [(c.id, c.name, c.arguments) for c in calls]
            finished = sorted(e.index for e in events if isinstance(e, CallFinished))
            assert finished == list(range(len(calls)))

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


class ListenerGone(Exception):
    pass


async def test_a_failing_listener_ends_the_batch_with_its_own_exception() -> None:
    a = scripted_server("a")

    async def on_event(event: DispatchEvent) -> None:
        if isinstance(event, CallStarted):
            raise ListenerGone

    async with serving(a) as servers:
        catalog = await catalog_of(servers)
        with pytest.raises(ListenerGone):
            await collect_tool_calls([call("1", "a__echo"), call("2", "a__echo")], catalog, servers, on_event=on_event)
