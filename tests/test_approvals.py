"""Human approval of tool calls: the config keys, interrupts, and every way a resume answers them."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from tests.service.agui_support import post_agui, run_input
from tests.service.support import connected, run_frame, running_service, send, until_terminal
from tests.support import check_stream
from tests.test_config import base, problems_of
from tests.test_runtime_runs import demo_config
from yao_actors.cli.chat import chat
from yao_actors.config import AssistantSpec, Config, InMemoryTransport, ServerRef, ServerSpec, parse_config
from yao_actors.conversation.interrupts.approvals import DECLINED, NOT_APPROVED, RESPONSE_SCHEMA, stored_approvals
from yao_actors.conversation.interrupts.inputs import PendingInput, stored_pending
from yao_actors.errors import RunErrorCode, StoreUnavailable
from yao_actors.events import Outcome, parse_event
from yao_actors.models import Completion, FunctionModel, ToolCall
from yao_actors.runtime import Runtime, open_runtime
from yao_actors.store import MemoryStore, StoreSpec, open_store
from yao_actors.testing.result_servers import build_result_server
from yao_actors.testing.servers import build_test_server
from yao_actors.tools.input_requests import InputRequest

QUESTION = "北京今天适合穿什么?"


def test_the_approval_keys_are_read() -> None:
    data = base()
    data["mcpServers"]["weather"]["approval"] = True
    data["mcpServers"]["clothing"]["approval"] = ["advise"]
    data["assistants"]["default"] |= {"approval": ["weather__get", "clothing__*"], "approval_timeout": 60}
    config = parse_config(data)
    assert config.servers["weather"].approval is True
    assert config.servers["clothing"].approval == frozenset({"advise"})
    assert config.assistants["default"].approval == ("weather__get", "clothing__*")
    assert config.assistants["default"].approval_timeout == 60


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ("server", "yes", "mcpServers.weather.approval: expected true, false or a list of tool names"),
        (
            "assistant",
            ["weather"],
            "assistants.default.approval[0]: expected 'server__tool', 'server__*' or 'destructive'",
        ),
        (
            "assistant",
            "everything",
            "assistants.default.approval: expected \"destructive\" or a list of 'server__tool' names",
        ),
        ("timeout", 0, "assistants.default.approval_timeout: must be > 0"),
    ],
)
def test_bad_approval_keys_are_refused_naming_the_key(where: str, value: Any, message: str) -> None:
    data = base()
    if where == "server":
        data["mcpServers"]["weather"]["approval"] = value
    else:
        data["assistants"]["default"]["approval" if where == "assistant" else "approval_timeout"] = value
    assert any(problem.startswith(message) for problem in problems_of(data)), problems_of(data)


def _seed_model(seen: list[list[dict[str, Any]]]) -> FunctionModel:
    """Asks for the weather and the clothing advice at once, then answers with every tool result it got."""

    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        seen.append([dict(m) for m in messages])
        if messages[-1]["role"] == "user" and messages[-1]["content"] == QUESTION:
            return Completion(
                tool_calls=(
                    ToolCall("c_weather", "weather__get", '{"city": "Beijing"}'),
                    ToolCall("c_advice", "clothing__advise", '{"temp": 3, "wind": 4, "lang": "zh"}'),
                )
            )
        return " | ".join(m["content"] for m in messages if m["role"] == "tool") or "no tools"

    return FunctionModel(answer)


def _config(**assistant: Any) -> Config:
    config = demo_config("m")
    weather = attrs.evolve(config.servers["weather"], approval=True)
    default = attrs.evolve(config.assistants["default"], **assistant)
    return attrs.evolve(config, servers={**config.servers, "weather": weather}, assistants={"default": default})


async def _interrupted(runtime: Runtime, thread_id: str = "t") -> dict[str, Any]:
    """Ask the seed's question; the run ends on the weather call's interrupt, which is returned."""
    result = await runtime.run("default", QUESTION, thread_id=thread_id)
    check_stream(result.events)
    assert result.outcome is Outcome.INTERRUPT
    outcome = result.events[-1]["outcome"]
    assert outcome["type"] == "interrupt"
    (interrupt,) = outcome["interrupts"]
    return dict(interrupt)


async def test_a_call_that_needs_approval_ends_the_run_with_an_interrupt_while_the_others_run() -> None:
    seen: list[list[dict[str, Any]]] = []
    with trio.fail_after(30):
        async with open_runtime(_config(), models={"m": _seed_model(seen)}) as runtime:
            result = await runtime.run("default", QUESTION, thread_id="t")
    check_stream(result.events)
    finished = parse_event(result.events[-1])  # the ag_ui model of RUN_FINISHED with an interrupt outcome
    assert finished.outcome is not None
    assert finished.outcome.type == "interrupt"
    (interrupt,) = result.events[-1]["outcome"]["interrupts"]
    assert interrupt["reason"] == "tool_approval"
    assert interrupt["toolCallId"] == "c_weather"
    assert "weather__get" in interrupt["message"]
    assert '"city": "Beijing"' in interrupt["message"]
    assert interrupt["responseSchema"] == RESPONSE_SCHEMA
    assert interrupt["expiresAt"].endswith("Z")
    # The other call of the batch ran; the held one did not.
    assert [e["toolCallId"] for e in result.events if e["type"] == "TOOL_CALL_RESULT"] == ["c_advice"]
    assert [r.call_id for r in result.tool_results] == ["c_advice"]
    assert len(seen) == 1


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        pytest.param({"approved": True}, '"city":"Beijing"', id="approved"),
        pytest.param({"approved": True, "arguments": {"city": "Shanghai"}}, '"city":"Shanghai"', id="edited"),
        pytest.param({"approved": False}, DECLINED, id="denied"),
    ],
)
async def test_a_resume_runs_or_declines_the_held_call_and_the_loop_goes_on(payload: Any, expected: str) -> None:
    seen: list[list[dict[str, Any]]] = []
    with trio.fail_after(30):
        async with open_runtime(_config(), models={"m": _seed_model(seen)}) as runtime:
            interrupt = await _interrupted(runtime)
            resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": payload}]
            result = await runtime.run("default", [], thread_id="t", resume=resume)
            history = runtime.conversations.history("t")
    check_stream(result.events)
    assert result.outcome is Outcome.ANSWERED
    weather = next(m for m in seen[1] if m.get("tool_call_id") == "c_weather")
    assert expected in weather["content"]
    assert expected in result.text
    ran = [e["toolCallId"] for e in result.events if e["type"] == "TOOL_CALL_RESULT"]
    assert ran == (["c_weather"] if payload["approved"] else [])
    # The thread's history answers every call exactly once.
    answered = [m["tool_call_id"] for m in history if m["role"] == "tool"]
    assert sorted(answered) == ["c_advice", "c_weather"]


async def test_a_resume_under_a_run_id_already_stored_is_refused_before_the_approved_call_runs() -> None:
    seen: list[list[dict[str, Any]]] = []
    with trio.fail_after(30):
        async with open_runtime(_config(), models={"m": _seed_model(seen)}) as runtime:
            interrupt = await _interrupted(runtime)
            taken = (await runtime.threads())[0]
            runs = (await runtime.history(taken.thread_id)).runs
            resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}]
            refused = await runtime.run("default", [], thread_id="t", run_id=runs[0].run_id, resume=resume)
            again = await runtime.run("default", [], thread_id="t", resume=resume)
    assert (refused.outcome, refused.code) == (Outcome.ERROR, "bad_request")
    assert refused.tool_results == ()  # the approved call did not run
    assert not [e for e in refused.events if e["type"] == "TOOL_CALL_RESULT"]
    assert again.outcome is Outcome.ANSWERED  # the approval still waits, and the next run answers it
    assert [e["toolCallId"] for e in again.events if e["type"] == "TOOL_CALL_RESULT"] == ["c_weather"]


async def test_a_cancelled_interrupt_is_declined_and_a_run_without_resume_cancels_open_ones() -> None:
    seen: list[list[dict[str, Any]]] = []
    with trio.fail_after(30):
        async with open_runtime(_config(), models={"m": _seed_model(seen)}) as runtime:
            interrupt = await _interrupted(runtime, "a")
            cancelled = await runtime.run(
                "default", [], thread_id="a", resume=[{"interruptId": interrupt["id"], "status": "cancelled"}]
            )
            await _interrupted(runtime, "b")
            moved_on = await runtime.run("default", "算了，谢谢", thread_id="b")
    assert DECLINED in cancelled.text
    assert NOT_APPROVED in moved_on.text
    # The model was told before the new message.
    assert seen[-1][-2:] == [
        {"role": "tool", "tool_call_id": "c_weather", "content": NOT_APPROVED},
        {"role": "user", "content": "算了，谢谢"},
    ]


async def test_an_unknown_or_expired_interrupt_is_a_run_error() -> None:
    seen: list[list[dict[str, Any]]] = []
    with trio.fail_after(30):
        async with open_runtime(_config(approval_timeout=0.001), models={"m": _seed_model(seen)}) as runtime:
            unknown = await runtime.run(
                "default", [], thread_id="none", resume=[{"interruptId": "nope", "status": "resolved"}]
            )
            interrupt = await _interrupted(runtime)
            await trio.sleep(0.01)  # the interrupt's 1 ms are over (expiry is wall-clock time, like expiresAt)
            approve = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}]
            expired = await runtime.run("default", [], thread_id="t", resume=approve)
            # An expired interrupt can still be cancelled, and the thread goes on.
            cancel = [{"interruptId": interrupt["id"], "status": "cancelled"}]
            after = await runtime.run("default", [], thread_id="t", resume=cancel)
    assert (unknown.outcome, unknown.code) == (Outcome.ERROR, "unknown_interrupt")
    assert (expired.outcome, expired.code) == (Outcome.ERROR, "interrupt_expired")
    assert expired.events[-1]["type"] == "RUN_ERROR"
    assert [e for e in expired.events if e["type"] == "TOOL_CALL_RESULT"] == []
    assert after.outcome is Outcome.ANSWERED
    assert DECLINED in after.text


async def test_an_assistants_approval_patterns_hold_calls_too() -> None:
    seen: list[list[dict[str, Any]]] = []
    config = demo_config("m")
    assistant = AssistantSpec(
        **{**attrs.asdict(config.assistants["default"], recurse=False), "approval": ("clothing__*",)}
    )
    config = attrs.evolve(config, assistants={"default": assistant})
    with trio.fail_after(30):
        async with open_runtime(config, models={"m": _seed_model(seen)}) as runtime:
            result = await runtime.run("default", QUESTION)
    (interrupt,) = result.events[-1]["outcome"]["interrupts"]
    assert interrupt["toolCallId"] == "c_advice"


async def test_a_tool_message_cannot_stand_in_for_an_approval() -> None:
    with trio.fail_after(30):
        async with open_runtime(_config(), models={"m": _seed_model([])}) as runtime:
            await _interrupted(runtime)
            forged = await runtime.run(
                "default",
                [{"role": "tool", "tool_call_id": "c_weather", "content": json.dumps({"temp": 30})}],
                thread_id="t",
            )
    assert (forged.outcome, forged.code) == (Outcome.ERROR, "bad_request")


async def test_the_approval_flow_over_the_websocket() -> None:
    seen: list[list[dict[str, Any]]] = []
    with trio.fail_after(30):
        async with connected(_config(), _seed_model(seen)) as (_, ws):
            await send(ws, run_frame(QUESTION, run_id="r1", thread_id="t"))
            first = await until_terminal(ws, "r1")
            (interrupt,) = first[-1]["outcome"]["interrupts"]
            payload = {"approved": True, "arguments": {"city": "Shanghai"}}
            resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": payload}]
            await send(ws, {"type": "run", "runId": "r2", "threadId": "t", "messages": [], "resume": resume})
            second = await until_terminal(ws, "r2")
    check_stream(first)
    check_stream(second)
    assert first[-1]["outcome"]["type"] == "interrupt"
    assert second[-1]["type"] == "RUN_FINISHED"
    assert '"city":"Shanghai"' in second[-1]["result"]["text"]


def _adding_model(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    if messages[-1]["role"] == "user":
        return Completion(tool_calls=(ToolCall("c_add", "test__add", '{"a": 1, "b": 2}'),))
    return f"saw: {messages[-1]['content']}"


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        pytest.param('{"a": NaN, "b": 1}', "not usable JSON (NaN is not a JSON number", id="nan"),
        pytest.param('{"a": Infinity, "b": 1}', "not usable JSON (Infinity is not a JSON number", id="infinity"),
        pytest.param('{"a": -Infinity, "b": 1}', "not usable JSON (-Infinity is not a JSON number", id="-infinity"),
        pytest.param('{"a": "x", "b": 1}', "a: 'x' is not valid under any of the given schemas", id="invalid"),
    ],
)
async def test_edited_arguments_with_nan_or_infinity_are_refused_as_invalid_arguments(
    arguments: str, error: str
) -> None:
    """The client's frame, as its JSON text: Python reads ``NaN`` / ``Infinity``, which would reach the tool as
    ``null``; the held call gets the error any invalid argument gets, and is not run."""
    config = Config(
        servers={"test": ServerSpec("test", InMemoryTransport(build_test_server()), approval=True)},
        assistants={"default": AssistantSpec(id="default", model="m", servers=(ServerRef("test"),))},
    )
    with trio.fail_after(30):
        async with connected(config, FunctionModel(_adding_model)) as (_, ws):
            await send(ws, run_frame("add", run_id="r1", thread_id="t"))
            (interrupt,) = (await until_terminal(ws, "r1"))[-1]["outcome"]["interrupts"]
            payload = f'{{"approved": true, "arguments": {arguments}}}'
            resume = f'[{{"interruptId": "{interrupt["id"]}", "status": "resolved", "payload": {payload}}}]'
            await ws.send_message(
                f'{{"type": "run", "runId": "r2", "threadId": "t", "messages": [], "resume": {resume}}}'
            )
            second = await until_terminal(ws, "r2")
    check_stream(second)
    [result] = [e["content"] for e in second if e["type"] == "TOOL_CALL_RESULT"]
    assert result.startswith(f"Error: invalid arguments: {error}")  # the service's own check: the call never went out
    assert second[-1]["type"] == "RUN_FINISHED"
    assert second[-1]["result"]["text"] == f"saw: {result}"


async def test_the_approval_flow_over_http_with_the_clients_conversation() -> None:
    seen: list[list[dict[str, Any]]] = []
    question = {"id": "u1", "role": "user", "content": QUESTION}
    with trio.fail_after(30):
        async with (
            open_runtime(_config(), models={"m": _seed_model(seen)}) as runtime,
            running_service(runtime) as service,
        ):
            first = await post_agui(service.port, run_input(thread_id="t", run_id="r1", messages=[question]))
            (interrupt,) = first.events[-1]["outcome"]["interrupts"]
            calls = [
                {"id": e["toolCallId"], "type": "function", "function": {"name": e["toolCallName"], "arguments": args}}
                for e in first.events
                if e["type"] == "TOOL_CALL_START"
                for args in [
                    "".join(
                        a["delta"]
                        for a in first.events
                        if a.get("toolCallId") == e["toolCallId"] and a["type"] == "TOOL_CALL_ARGS"
                    )
                ]
            ]
            advice = next(e for e in first.events if e["type"] == "TOOL_CALL_RESULT")
            conversation = [
                question,
                {"id": "a1", "role": "assistant", "toolCalls": calls},
                {"id": "t1", "role": "tool", "toolCallId": advice["toolCallId"], "content": advice["content"]},
            ]
            resume = [{"interruptId": interrupt["id"], "status": "resolved", "payload": {"approved": True}}]
            second = await post_agui(
                service.port, run_input(thread_id="t", run_id="r2", messages=conversation, resume=resume)
            )
    assert first.status == second.status == 200
    assert second.events[-1]["type"] == "RUN_FINISHED"
    assert [e["toolCallId"] for e in second.events if e["type"] == "TOOL_CALL_RESULT"] == ["c_weather"]
    assert [m.get("tool_call_id") for m in seen[1] if m["role"] == "tool"] == ["c_weather", "c_advice"]
    assert '"city":"Beijing"' in second.events[-1]["result"]["text"]


async def test_yao_actors_chat_asks_y_n_and_resumes_the_run() -> None:
    asked: list[str] = []

    async def say_yes(question: str) -> str:
        asked.append(question)
        return "y"

    out = io.StringIO()
    with trio.fail_after(30):
        async with (
            open_runtime(_config(), models={"m": _seed_model([])}) as runtime,
            running_service(runtime) as service,
        ):
            code = await chat(QUESTION, url=service.url, out=out, ask=say_yes)
    assert code == 0
    assert len(asked) == 1
    assert "weather__get" in asked[0]
    printed = out.getvalue()
    assert "— interrupt" in printed
    assert "✓ weather__get" in printed
    assert '"city":"Beijing"' in printed.splitlines()[-2]  # the answer after the approved call ran


def _approve(interrupt_id: str) -> list[dict[str, Any]]:
    return [{"interruptId": interrupt_id, "status": "resolved", "payload": {"approved": True}}]


async def test_pending_approvals_survive_closing_and_reopening_the_runtime_on_sqlite(tmp_path: Path) -> None:
    seen: list[list[dict[str, Any]]] = []
    spec = StoreSpec.sqlite(tmp_path / "conversations.sqlite3")
    with trio.fail_after(30):
        async with (
            open_store(spec) as store,
            open_runtime(_config(), models={"m": _seed_model(seen)}, store=store) as runtime,
        ):
            interrupt = await _interrupted(runtime, "t")
            await _interrupted(runtime, "forgotten")
            assert await runtime.forget("forgotten")
        # Another process (a new store object and runtime) on the same file.
        async with open_store(spec) as store:
            kept = await store.load_approvals("t")
            gone = await store.load_approvals("forgotten")
            async with open_runtime(_config(), models={"m": _seed_model(seen)}, store=store) as runtime:
                stale = await runtime.run("default", [], thread_id="t", resume=_approve("approval-nope"))
                resumed = await runtime.run("default", [], thread_id="t", resume=_approve(interrupt["id"]))
                again = await runtime.run("default", [], thread_id="t", resume=_approve(interrupt["id"]))
            left = await store.load_approvals("t")
    assert [a["interruptId"] for a in kept] == [interrupt["id"]]
    assert gone == []
    # A stale id keeps its error, and does not disturb the call that waits.
    assert (stale.outcome, stale.code) == (Outcome.ERROR, RunErrorCode.UNKNOWN_INTERRUPT)
    check_stream(resumed.events)
    assert resumed.outcome is Outcome.ANSWERED
    assert [e["toolCallId"] for e in resumed.events if e["type"] == "TOOL_CALL_RESULT"] == ["c_weather"]
    assert [r.name for r in resumed.tool_results] == ["weather__get"]
    assert all(r.ok for r in resumed.tool_results)
    weather = next(m for m in seen[-1] if m.get("tool_call_id") == "c_weather")  # the model saw the real result
    assert '"city":"Beijing"' in weather["content"]
    assert '"city":"Beijing"' in resumed.text
    # Answered means gone: from memory and from the store.
    assert (again.outcome, again.code) == (Outcome.ERROR, RunErrorCode.UNKNOWN_INTERRUPT)
    assert left == []


async def test_a_thread_dropped_from_memory_loads_its_pending_approvals_from_the_store() -> None:
    with trio.fail_after(30):
        async with open_runtime(_config(), models={"m": _seed_model([])}) as runtime:
            interrupt = await _interrupted(runtime)
            runtime.conversations.close_thread("t")
            assert runtime.conversations.thread_ids() == ()
            resumed = await runtime.run("default", [], thread_id="t", resume=_approve(interrupt["id"]))
    assert resumed.outcome is Outcome.ANSWERED
    assert [r.call_id for r in resumed.tool_results] == ["c_weather"]


@attrs.define(eq=False)
class _ApprovalsDown(MemoryStore):
    """A memory store that cannot write pending approvals while ``down``."""

    down: bool = False

    async def save_approvals(self, *args: Any, **kwargs: Any) -> None:
        if self.down:
            raise StoreUnavailable("the test's store is down")
        await super().save_approvals(*args, **kwargs)


async def test_approvals_the_store_cannot_keep_end_the_run_with_store_unavailable() -> None:
    store = _ApprovalsDown(down=True)
    with trio.fail_after(30):
        async with open_runtime(_config(), models={"m": _seed_model([])}, store=store) as runtime:
            unkept = await runtime.run("default", QUESTION, thread_id="a")
            store.down = False
            interrupt = await _interrupted(runtime, "b")
            store.down = True
            refused = await runtime.run("default", [], thread_id="b", resume=_approve(interrupt["id"]))
            store.down = False
            resumed = await runtime.run("default", [], thread_id="b", resume=_approve(interrupt["id"]))
    # No interrupt goes out that a restart could lose.
    assert (unkept.outcome, unkept.code) == (Outcome.ERROR, RunErrorCode.STORE_UNAVAILABLE)
    assert unkept.events[-1]["type"] == "RUN_ERROR"
    # A resume whose approval cannot be cleared runs nothing; the call still waits, and runs once the store is back.
    assert (refused.outcome, refused.code) == (Outcome.ERROR, RunErrorCode.STORE_UNAVAILABLE)
    assert refused.tool_results == ()
    assert resumed.outcome is Outcome.ANSWERED
    assert [r.call_id for r in resumed.tool_results] == ["c_weather"]


def test_a_stored_approval_that_cannot_be_read_is_left_out_naming_why(caplog: pytest.LogCaptureFixture) -> None:
    good = {
        "interruptId": "approval-c1",
        "call": {"id": "c1", "name": "weather__get", "arguments": "{}"},
        "expiresAt": 9,
    }
    bad = [{**good, "expiresAt": "soon"}, {**good, "call": None}, {"call": good["call"], "expiresAt": 9}]
    loaded = stored_approvals("t", [bad[0], good, *bad[1:]])
    assert [(p.interrupt_id, p.call.name, p.expires_at) for p in loaded] == [("approval-c1", "weather__get", 9.0)]
    assert loaded[0].to_record() == good
    messages = [r.getMessage() for r in caplog.records]
    assert any("stored approval 0" in m and "'expiresAt' must be a number" in m for m in messages)
    assert any("stored approval 2" in m and "'call' must be an object" in m for m in messages)
    assert any("stored approval 3" in m and "'interruptId' must be a string" in m for m in messages)


def test_stored_questions_and_approvals_that_cannot_be_read_are_left_out_naming_which(
    caplog: pytest.LogCaptureFixture,
) -> None:
    approval = {"interruptId": "approval-c1", "call": {"id": "c1", "name": "w__get", "arguments": "{}"}, "expiresAt": 9}
    question = PendingInput(
        "input-c2",
        ToolCall("c2", "w__book", "{}"),
        "w",
        "k1",
        InputRequest("w", "book", "form", "Which day?", {"type": "object", "properties": {}}),
        {},
        9.0,
        request_state="s",
    ).to_record()
    unreadable = {**question, "question": {"nonsense": 1}}
    loaded = stored_pending("t", [unreadable, approval, {**approval, "expiresAt": "soon"}, question])
    assert [p.interrupt_id for p in loaded] == ["approval-c1", "input-c2"]
    assert isinstance(loaded[1], PendingInput)
    assert loaded[1].to_record() == question
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("thread t: stored question 0 left out") and "not a pending question" in m for m in messages)
    assert any(m.startswith("thread t: stored approval 1 left out") and "'expiresAt'" in m for m in messages)


def _docs_untrusted_server_config() -> dict[str, Any]:
    """The configuration docs/approvals.md shows for holding every call of a server one does not control."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "approvals.md").read_text(encoding="utf-8")
    block = page.split("```json\n", 1)[1].split("```", 1)[0]
    data: dict[str, Any] = json.loads(block)
    return data


@pytest.mark.parametrize(
    ("server_approval", "assistant_approval", "held"),
    [
        pytest.param(False, "destructive", False, id="the-hint-alone-is-believed"),
        pytest.param(True, "destructive", True, id="server-approval-true"),
        pytest.param(False, ["destructive", "vendor__*"], True, id="assistant-pattern"),
    ],
)
async def test_an_untrusted_servers_read_only_hint_does_not_pass_its_calls_when_every_call_is_held(
    server_approval: bool, assistant_approval: Any, held: bool
) -> None:
    data = _docs_untrusted_server_config()
    assert data["mcpServers"]["vendor"]["approval"] is True
    assert data["assistants"]["default"]["approval"] == ["destructive", "vendor__*"]
    data["mcpServers"]["vendor"]["approval"] = server_approval
    data["assistants"]["default"]["approval"] = assistant_approval
    config = parse_config(data)
    # The vendor's `lookup` says it only reads (readOnlyHint: true); nobody here can check that it does.
    vendor = attrs.evolve(config.servers["vendor"], transport=InMemoryTransport(build_result_server()))
    assistant = attrs.evolve(config.assistants["default"], servers=(ServerRef("vendor"),))  # "files" is not run
    config = attrs.evolve(config, servers={"vendor": vendor}, assistants={"default": assistant})

    def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if messages[-1]["role"] == "user":
            return Completion(tool_calls=(ToolCall("c_lookup", "vendor__lookup", '{"key": "k"}'),))
        return "done"

    with trio.fail_after(30):
        async with open_runtime(config, models={"demo": FunctionModel(answer)}) as runtime:
            result = await runtime.run("default", "look it up")
    check_stream(result.events)
    assert (result.outcome is Outcome.INTERRUPT) is held
    assert [r.call_id for r in result.tool_results] == ([] if held else ["c_lookup"])
