"""A server's questions to the user become AG-UI interrupts (no input handler), answered by the next run's resume:
the SDK's resolver (``Resolve`` → ``Elicit``) and ``ctx.elicit_url`` tools over stdio and streamable HTTP, on
handshake-era and 2026-07-28 connections; accept, decline, cancel, invalid content, a held call gone, and a
restart between the interrupt and the resume with SQLite."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.integration.asking_support import asking_server, http_asking_server
from tests.service.support import running_service
from tests.support import check_stream
from yao_actors import AssistantSpec, Completion, Config, FunctionModel, Outcome, ServerRef, ToolCall, open_runtime
from yao_actors.cli.chat import chat
from yao_actors.config import InMemoryTransport, ServerSpec
from yao_actors.errors import RunErrorCode
from yao_actors.runtime import Runtime
from yao_actors.specs import StoreSpec
from yao_actors.testing.asking import build_asking_server

pytestmark = pytest.mark.filterwarnings(r"ignore:Async generator '(httpx2|httpcore2)\.:ResourceWarning")

BOOKING = {"date": "2027-01-02", "guests": 2, "seat": "window", "breakfast": True}
BOOK = ToolCall("c_book", "asking__book", json.dumps({"hotel": "Grand"}))
COUNT = ToolCall("c_count", "asking__bookings", "{}")


def model(*calls: ToolCall) -> tuple[FunctionModel, list[list[dict[str, Any]]]]:
    """Calls ``calls`` first, then answers with the tool messages it got; and every request it saw."""
    seen: list[list[dict[str, Any]]] = []

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion | str:
        seen.append(messages)
        if messages[-1]["role"] == "tool":
            return " | ".join(m["content"] for m in messages if m["role"] == "tool")
        if messages[-1].get("content") == "anything else?":
            return "no"
        return Completion(tool_calls=calls)

    return FunctionModel(script), seen


def config(transport: Any, protocol: str, store: StoreSpec | None = None, **server: Any) -> Config:
    spec = ServerSpec("asking", transport, protocol=protocol, **server)
    assistant = AssistantSpec("a", "m", prompt="Be brief", servers=(ServerRef("asking"),))
    return Config(servers={"asking": spec}, assistants={"a": assistant}, store=store)


def interrupts_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    finished = events[-1]
    assert finished["type"] == "RUN_FINISHED", finished
    return list(finished["outcome"]["interrupts"])


def resolved(interrupt: dict[str, Any], action: str, content: Any = None) -> list[dict[str, Any]]:
    payload: dict[str, Any] = {"action": action} | ({"content": content} if content is not None else {})
    return [{"interruptId": interrupt["id"], "status": "resolved", "payload": payload}]


async def bookings(runtime: Runtime) -> Any:
    return (await runtime.servers["asking"].call_tool("bookings", {})).result


@asynccontextmanager
async def in_process_asking(
    protocol: str, *calls: ToolCall, **server: Any
) -> AsyncIterator[tuple[Runtime, list[list[dict[str, Any]]]]]:
    """A runtime on the asking server in process (``server``: more of its spec), whose model calls ``calls``
    (:func:`model`); yields it and every request the model saw."""
    scripted, seen = model(*calls)
    transport = InMemoryTransport(build_asking_server())
    async with open_runtime(config(transport, protocol, **server), models={"m": scripted}) as rt:
        yield rt, seen


async def the_question(rt: Runtime) -> dict[str, Any]:
    """Ask to book on thread ``t``: the one interrupt the run ends on."""
    first = await rt.run("a", "book", thread_id="t")
    (interrupt,) = interrupts_of(first.events)
    return interrupt


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("protocol", ["legacy", "2026-07-28"])
async def test_a_question_ends_the_run_and_the_resume_answers_it(transport: str, protocol: str) -> None:
    scripted, seen = model(BOOK, COUNT)
    with trio.fail_after(60):
        async with (
            asking_server(transport) as where,
            open_runtime(config(where, protocol), models={"m": scripted}) as rt,
        ):
            first = await rt.run("a", "book the Grand", thread_id="t")
            (interrupt,) = interrupts_of(first.events)
            second = await rt.run("a", [], thread_id="t", resume=resolved(interrupt, "accept", BOOKING))
            count = await bookings(rt)
            history = rt.conversations.history("t")
    check_stream(first.events)
    check_stream(second.events)
    assert first.outcome is Outcome.INTERRUPT
    assert interrupt["reason"] == "input_required"
    assert interrupt["toolCallId"] == "c_book"
    assert interrupt["message"] == "Booking Grand: which day, how many guests?"
    assert set(interrupt["responseSchema"]["properties"]) == {"date", "guests", "seat", "breakfast"}
    assert interrupt["expiresAt"].endswith("Z")
    # The batch's other call went on; the asking one has no result yet.
    assert [e["toolCallId"] for e in first.events if e["type"] == "TOOL_CALL_RESULT"] == ["c_count"]
    assert second.outcome is Outcome.ANSWERED
    assert [e["toolCallId"] for e in second.events if e["type"] == "TOOL_CALL_RESULT"] == ["c_book"]
    booked = next(m for m in seen[-1] if m.get("tool_call_id") == "c_book")
    assert json.loads(booked["content"]) == {"booked": True, "hotel": "Grand", **BOOKING, "count": 1}
    assert count == {"count": 1}
    answered = [m["tool_call_id"] for m in history if m["role"] == "tool"]
    assert sorted(answered) == ["c_book", "c_count"]


@pytest.mark.parametrize("protocol", ["legacy", "2026-07-28"])
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_decline_or_cancel_reaches_the_server_and_the_model_sees_the_tool_result(
    protocol: str, action: str
) -> None:
    with trio.fail_after(30):
        async with in_process_asking(protocol, BOOK) as (rt, seen):
            interrupt = await the_question(rt)
            second = await rt.run("a", [], thread_id="t", resume=resolved(interrupt, action))
            count = await bookings(rt)
    assert second.outcome is Outcome.ANSWERED
    booked = next(m for m in seen[-1] if m.get("tool_call_id") == "c_book")
    assert json.loads(booked["content"]) == {"booked": False, "action": action}
    assert count == {"count": 0}


@pytest.mark.parametrize("protocol", ["legacy", "2026-07-28"])
async def test_invalid_content_is_refused_naming_the_field_and_the_interrupt_stays_open(protocol: str) -> None:
    with trio.fail_after(30):
        async with in_process_asking(protocol, BOOK) as (rt, _):
            interrupt = await the_question(rt)
            bad = await rt.run("a", [], thread_id="t", resume=resolved(interrupt, "accept", BOOKING | {"guests": 0}))
            missing = await rt.run("a", [], thread_id="t", resume=resolved(interrupt, "accept", {"guests": 2}))
            wrong = await rt.run("a", [], thread_id="t", resume=resolved(interrupt, "maybe"))
            good = await rt.run("a", [], thread_id="t", resume=resolved(interrupt, "accept", BOOKING))
            count = await bookings(rt)
    assert (bad.outcome, bad.code) == (Outcome.ERROR, RunErrorCode.INVALID_RESUME)
    assert "resume[0].payload.content.guests:" in (bad.error or "")
    assert missing.code is RunErrorCode.INVALID_RESUME
    assert "resume[0].payload.content: 'date' is a required property" in (missing.error or "")
    assert wrong.code is RunErrorCode.INVALID_RESUME
    assert "resume[0].payload.action: must be one of" in (wrong.error or "")
    assert good.outcome is Outcome.ANSWERED
    assert count == {"count": 1}


async def test_a_url_question_is_a_url_required_interrupt() -> None:
    scripted, seen = model(ToolCall("c_in", "asking__sign_in", "{}"))
    with trio.fail_after(60):
        async with asking_server("stdio") as where, open_runtime(config(where, "legacy"), models={"m": scripted}) as rt:
            first = await rt.run("a", "sign me in", thread_id="t")
            (interrupt,) = interrupts_of(first.events)
            second = await rt.run("a", [], thread_id="t", resume=resolved(interrupt, "accept"))
    assert interrupt["reason"] == "url_required"
    assert (interrupt["url"], interrupt["elicitationId"]) == ("https://example.com/login?flow=42", "login-42")
    # Also in metadata, the one place of an AG-UI Interrupt where the official client keeps fields it does not know.
    assert interrupt["metadata"] == {
        "server": "asking",
        "tool": "sign_in",
        "url": "https://example.com/login?flow=42",
        "elicitationId": "login-42",
    }
    assert interrupt["message"] == "Sign in to continue"
    assert "responseSchema" not in interrupt
    assert second.outcome is Outcome.ANSWERED
    signed = next(m for m in seen[-1] if m.get("tool_call_id") == "c_in")
    assert json.loads(signed["content"]) == {"action": "accept"}


async def test_a_handshake_era_call_gone_past_input_timeout_is_interrupt_expired(
    autojump_clock: trio.abc.Clock,
) -> None:
    with trio.fail_after(3000):
        async with in_process_asking("legacy", BOOK, input_timeout=120) as (rt, seen):
            interrupt = await the_question(rt)
            await trio.sleep(121)  # the actor told the server "cancel" and let the call go
            late = await rt.run("a", [], thread_id="t", resume=resolved(interrupt, "accept", BOOKING))
            after = await rt.run("a", "anything else?", thread_id="t")
            count = await bookings(rt)
    assert (late.outcome, late.code) == (Outcome.ERROR, RunErrorCode.INTERRUPT_EXPIRED)
    assert "the tool could not complete" in (late.error or "")
    assert after.outcome is Outcome.ANSWERED  # the interrupt is gone; the model is told the call got no result
    told = next(m for m in seen[-1] if m.get("tool_call_id") == "c_book")
    assert "Error" in told["content"]
    assert count == {"count": 0}


async def test_a_modern_question_survives_a_restart_and_its_call_completes_once(tmp_path: Path) -> None:
    """The runtime stops between the interrupt and the resume (SQLite); the HTTP server lives on and counts."""
    store = StoreSpec.sqlite(tmp_path / "threads.sqlite3")
    scripted, seen = model(BOOK)
    with trio.fail_after(60):
        async with http_asking_server() as where:
            async with open_runtime(config(where, "2026-07-28", store), models={"m": scripted}) as rt:
                first = await rt.run("a", "book", thread_id="t")
                (interrupt,) = interrupts_of(first.events)
            async with open_runtime(config(where, "2026-07-28", store), models={"m": scripted}) as rt:
                resume = resolved(interrupt, "accept", BOOKING)
                second = await rt.run("a", [], thread_id="t", resume=resume)
                again = await rt.run("a", [], thread_id="t", resume=resume)
                count = await bookings(rt)
    assert second.outcome is Outcome.ANSWERED
    booked = next(m for m in seen[-1] if m.get("tool_call_id") == "c_book")
    assert json.loads(booked["content"])["count"] == 1
    # The pending question was cleared before the call went out: the same resume again finds nothing.
    assert (again.outcome, again.code) == (Outcome.ERROR, RunErrorCode.UNKNOWN_INTERRUPT)
    assert count == {"count": 1}


async def test_an_approval_and_a_question_wait_together_and_one_resume_answers_both() -> None:
    with trio.fail_after(30):
        async with in_process_asking("2026-07-28", BOOK, COUNT, approval=frozenset({"bookings"})) as (rt, seen):
            first = await rt.run("a", "book", thread_id="t")
            question, approval = sorted(interrupts_of(first.events), key=lambda i: i["reason"])
            resume = [
                {"interruptId": approval["id"], "status": "resolved", "payload": {"approved": True}},
                *resolved(question, "accept", BOOKING),
            ]
            second = await rt.run("a", [], thread_id="t", resume=resume)
    assert (question["reason"], question["toolCallId"]) == ("input_required", "c_book")
    assert (approval["reason"], approval["toolCallId"]) == ("tool_approval", "c_count")
    assert second.outcome is Outcome.ANSWERED
    contents = {m["tool_call_id"]: json.loads(m["content"]) for m in seen[-1] if m.get("role") == "tool"}
    assert contents["c_book"]["count"] == 1
    assert contents["c_count"] == {"count": 0}  # approved calls run first, then the answers go out


async def test_yao_actors_chat_asks_the_form_field_by_field_and_opens_the_url() -> None:
    replies = iter(["2027-01-02", "many", "2", "window", "", "y"])  # "many" is asked again; "" skips breakfast
    asked: list[str] = []

    async def person(question: str) -> str:
        asked.append(question)
        return next(replies)

    out = io.StringIO()
    with trio.fail_after(30):
        async with (
            in_process_asking("legacy", BOOK, ToolCall("c_in", "asking__sign_in", "{}")) as (rt, seen),
            running_service(rt) as service,
        ):
            code = await chat("book and sign in", url=service.url, assistant="a", out=out, ask=person)
    assert code == 0, out.getvalue()
    assert "? Booking Grand: which day, how many guests? (a form: /decline or /cancel answers it so)" in out.getvalue()
    assert asked[0].startswith("  Date (Day of the stay, YYYY-MM-DD) [string]")
    assert asked[2] == f"{asked[1]} (a whole number)"  # the integer asked again, saying why
    assert "[window/aisle]" in asked[3]
    assert "optional" in asked[4]
    assert asked[5] == "Sign in to continue: open https://example.com/login?flow=42 — done?"
    contents = {m["tool_call_id"]: json.loads(m["content"]) for m in seen[-1] if m.get("role") == "tool"}
    assert contents["c_book"] == {"booked": True, "hotel": "Grand", **BOOKING, "breakfast": False, "count": 1}
    assert contents["c_in"] == {"action": "accept"}


async def test_an_expired_question_is_refused_and_can_still_be_cancelled() -> None:
    with trio.fail_after(30):
        async with in_process_asking("2026-07-28", BOOK, input_timeout=0.001) as (rt, seen):
            interrupt = await the_question(rt)
            await trio.sleep(0.01)  # its 1 ms are over (expiry is wall-clock time, like expiresAt)
            late = await rt.run("a", [], thread_id="t", resume=resolved(interrupt, "accept", BOOKING))
            cancelled = [{"interruptId": interrupt["id"], "status": "cancelled"}]
            after = await rt.run("a", [], thread_id="t", resume=cancelled)
            count = await bookings(rt)
    assert (late.outcome, late.code) == (Outcome.ERROR, RunErrorCode.INTERRUPT_EXPIRED)
    assert after.outcome is Outcome.ANSWERED
    booked = next(m for m in seen[-1] if m.get("tool_call_id") == "c_book")
    assert json.loads(booked["content"]) == {"booked": False, "action": "cancel"}
    assert count == {"count": 0}


async def test_a_run_without_resume_cancels_the_open_question_and_goes_on() -> None:
    with trio.fail_after(30):
        async with in_process_asking("2026-07-28", BOOK) as (rt, seen):
            await the_question(rt)
            after = await rt.run("a", "anything else?", thread_id="t")
    assert after.outcome is Outcome.ANSWERED
    booked = next(m for m in seen[-1] if m.get("tool_call_id") == "c_book")
    assert json.loads(booked["content"]) == {"booked": False, "action": "cancel"}
