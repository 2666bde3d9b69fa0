"""An embedder answers what a server asks the user (``input_handler``): the SDK's ``ctx.elicit``, ``ctx.elicit_url``
and ``Resolve`` → ``Elicit`` tools, over stdio and streamable HTTP, in every protocol mode."""

from __future__ import annotations

import functools
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.integration.actor_checks import PROTOCOLS
from tests.integration.asking_support import asking_server
from tests.integration.test_service_readme_example import page_example
from yao_actors import AssistantSpec, Completion, Config, FunctionModel, ServerRef, ToolCall, open_runtime
from yao_actors.config import InMemoryTransport, ServerSpec, StdioTransport
from yao_actors.errors import ErrorKind
from yao_actors.testing.asking import build_asking_server
from yao_actors.tools.input_requests import InputAnswer, InputHandler, InputRequest, InputRound
from yao_actors.tools.server_actor import ServerHandle, ServerState, serve_mcp_server

pytestmark = pytest.mark.filterwarnings(r"ignore:Async generator '(httpx2|httpcore2)\.:ResourceWarning")

BOOKING = {"date": "2027-01-02", "guests": 2, "seat": "window", "breakfast": True}


@asynccontextmanager
async def serving(spec: ServerSpec, handler: InputHandler | None) -> AsyncIterator[ServerHandle]:
    async with trio.open_nursery() as nursery:
        start = functools.partial(serve_mcp_server, spec, input_handler=handler)
        handle: ServerHandle = await nursery.start(start)
        assert handle.state is ServerState.READY, handle.statistics().last_error
        yield handle
        nursery.cancel_scope.cancel()


def answering(*answers: InputAnswer) -> tuple[InputHandler, list[InputRequest]]:
    """A handler giving ``answers`` in turn, and the list of what it was asked."""
    asked: list[InputRequest] = []

    async def handler(request: InputRequest) -> InputAnswer:
        asked.append(request)
        return answers[len(asked) - 1]

    return handler, asked


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize(("protocol", "version"), PROTOCOLS)
async def test_a_resolver_asks_and_the_handler_answers(transport: str, protocol: str, version: str) -> None:
    handler, asked = answering(InputAnswer("accept", BOOKING), InputAnswer("decline"), InputAnswer("cancel"))
    with trio.fail_after(60):
        async with (
            asking_server(transport) as where,
            serving(ServerSpec("asking", where, protocol=protocol), handler) as h,
        ):
            assert h.statistics().protocol == version
            accepted = await h.call_tool("book", {"hotel": "Grand"})
            declined = await h.call_tool("book", {"hotel": "Grand"})
            cancelled = await h.call_tool("book", {"hotel": "Grand"})
            count = await h.call_tool("bookings", {})
    assert accepted.result == {"booked": True, "hotel": "Grand", **BOOKING, "count": 1}
    assert declined.result == {"booked": False, "action": "decline"}
    assert cancelled.result == {"booked": False, "action": "cancel"}
    assert count.result == {"count": 1}
    first = asked[0]
    assert (first.server, first.tool, first.kind) == ("asking", "book", "form")
    assert first.message == "Booking Grand: which day, how many guests?"
    assert first.schema is not None
    assert set(first.schema["properties"]) == {"date", "guests", "seat", "breakfast"}
    assert first.schema["properties"]["seat"]["enum"] == ["window", "aisle"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_elicit_and_elicit_url_on_a_handshake_era_connection(transport: str) -> None:
    handler, asked = answering(InputAnswer("accept", {"name": "Ann"}), InputAnswer("accept"), InputAnswer("decline"))
    with trio.fail_after(60):
        async with (
            asking_server(transport) as where,
            serving(ServerSpec("asking", where, protocol="legacy"), handler) as h,
        ):
            greeted = await h.call_tool("greet", {})
            signed_in = await h.call_tool("sign_in", {})
            refused = await h.call_tool("sign_in", {})
    assert greeted.result == {"greeting": "Hello, Ann!"}
    assert signed_in.result == {"action": "accept"}
    assert refused.result == {"action": "decline"}
    url = asked[1]
    assert (url.kind, url.url, url.elicitation_id) == ("url", "https://example.com/login?flow=42", "login-42")
    assert url.message == "Sign in to continue"


async def test_ctx_elicit_fails_the_call_on_a_stateless_connection() -> None:
    """The SDK's ``ctx.elicit`` needs a back-channel 2026-07-28 has not: the tool fails, and says so."""
    handler, asked = answering(InputAnswer("accept", {"name": "Ann"}))
    with trio.fail_after(60):
        async with (
            asking_server("stdio") as where,
            serving(ServerSpec("asking", where, protocol="2026-07-28"), handler) as h,
        ):
            outcome = await h.call_tool("greet", {})
    assert outcome.kind is ErrorKind.TOOL_ERROR
    assert "back-channel" in (outcome.error or "")
    assert asked == []


@pytest.mark.parametrize("protocol", ["legacy", "2026-07-28"])
async def test_without_a_handler_a_call_that_asks_ends_input_required(protocol: str) -> None:
    """The caller gets the question to pass on (the runtime makes it an interrupt); nothing is booked yet."""
    spec = ServerSpec("asking", InMemoryTransport(build_asking_server()), protocol=protocol)
    async with serving(spec, None) as handle:
        outcome = await handle.call_tool("book", {"hotel": "Grand"})
        count = await handle.call_tool("bookings", {})
    assert outcome.kind is ErrorKind.INPUT_REQUIRED
    assert isinstance(outcome.result, InputRound)
    ((_key, question),) = outcome.result.questions
    assert (question.tool, question.message) == ("book", "Booking Grand: which day, how many guests?")
    assert outcome.result.arguments == {"hotel": "Grand"}
    # 2026-07-28: the state to call again with; handshake-era: the ticket of the call held open
    assert (outcome.result.request_state is not None) == (protocol == "2026-07-28")
    assert (outcome.result.ticket is not None) == (protocol == "legacy")
    assert count.result == {"count": 0}


@pytest.mark.parametrize("protocol", ["legacy", "2026-07-28"])
async def test_waiting_for_the_user_does_not_count_against_the_call_timeout(
    protocol: str, autojump_clock: trio.abc.Clock
) -> None:
    async def slow(request: InputRequest) -> InputAnswer:
        await trio.sleep(300)  # five minutes, against a call timeout of one
        return InputAnswer("accept", BOOKING)

    spec = ServerSpec("asking", InMemoryTransport(build_asking_server()), protocol=protocol, timeout=60)
    async with serving(spec, slow) as handle:
        outcome = await handle.call_tool("book", {"hotel": "Grand"})
    assert outcome.result == {"booked": True, "hotel": "Grand", **BOOKING, "count": 1}


@pytest.mark.parametrize("protocol", ["legacy", "2026-07-28"])
async def test_an_unanswered_question_is_cancelled_after_input_timeout(
    protocol: str, autojump_clock: trio.abc.Clock
) -> None:
    async def never(request: InputRequest) -> InputAnswer:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    spec = ServerSpec("asking", InMemoryTransport(build_asking_server()), protocol=protocol, input_timeout=120)
    async with serving(spec, never) as handle:
        started = trio.current_time()
        outcome = await handle.call_tool("book", {"hotel": "Grand"})
        waited = trio.current_time() - started
    assert outcome.result == {"booked": False, "action": "cancel"}
    assert 120 <= waited < 121  # the virtual clock: input_timeout, then the server's answer at once


async def test_a_handler_that_raises_fails_the_call_only() -> None:
    async def broken(request: InputRequest) -> InputAnswer:
        raise ValueError("no terminal")

    spec = ServerSpec("asking", InMemoryTransport(build_asking_server()), protocol="legacy")
    async with serving(spec, broken) as handle:
        outcome = await handle.call_tool("book", {"hotel": "Grand"})
        after = await handle.call_tool("bookings", {})
    assert outcome.kind is ErrorKind.TOOL_ERROR
    assert after.result == {"count": 0}


async def test_open_runtime_takes_the_input_handler() -> None:
    handler, asked = answering(InputAnswer("accept", BOOKING))
    call = ToolCall("c1", "asking__book", {"hotel": "Grand"})

    def script(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion | str:
        return messages[-1]["content"] if messages[-1]["role"] == "tool" else Completion(tool_calls=(call,))

    spec = ServerSpec("asking", InMemoryTransport(build_asking_server()))
    assistant = AssistantSpec("a", "scripted", prompt="Be brief", servers=(ServerRef("asking"),))
    config = Config(servers={"asking": spec}, assistants={"a": assistant})
    async with open_runtime(config, models={"scripted": FunctionModel(script)}, input_handler=handler) as runtime:
        result = await runtime.run("a", "book the Grand")
    assert [r.result for r in result.tool_results] == [{"booked": True, "hotel": "Grand", **BOOKING, "count": 1}]
    assert [request.tool for request in asked] == ["book"]


EVERYTHING = Path(__file__).parents[1] / "node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"


@pytest.mark.skipif(not EVERYTHING.exists(), reason="npm ci --prefix tests/node installs server-everything")
async def test_the_official_everything_server_asks_a_form_and_a_url() -> None:
    """``@modelcontextprotocol/server-everything`` (TypeScript SDK) offers its elicitation tools to a client that
    declares the capability; its async variant needs the tasks extension, which the Python SDK 2.x client lacks."""

    async def handler(request: InputRequest) -> InputAnswer:
        asked.append(request)
        if request.kind == "url":
            return InputAnswer("accept")
        return InputAnswer(
            "accept", {"name": "Ann Lee", "check": True, "integer": 7, "untitledSingleSelectEnum": "Joey"}
        )

    asked: list[InputRequest] = []
    spec = ServerSpec("everything", StdioTransport("node", (str(EVERYTHING), "stdio")), timeout=30)
    with trio.fail_after(60):
        async with serving(spec, handler) as handle:
            names = {tool.name for tool in await handle.list_tools()}
            form = await handle.call_tool("trigger-elicitation-request", {})
            url = await handle.call_tool("trigger-url-elicitation", {"url": "https://example.com/pay"})
    assert {"trigger-elicitation-request", "trigger-url-elicitation"} <= names
    assert form.ok, form
    assert "- Name: Ann Lee" in str(form.result)
    assert "- Favorite Integer: 7" in str(form.result)
    assert url.ok, url
    assert "URL: https://example.com/pay" in str(url.result)
    assert [a.kind for a in asked] == ["form", "url"]
    assert asked[0].schema is not None
    assert asked[0].schema["properties"]["untitledSingleSelectEnum"]["enum"][3] == "Chandler"
    assert (asked[1].url, asked[1].message) == (
        "https://example.com/pay",
        "Please open the link to complete this action.",
    )


async def test_the_input_pages_server_asks_as_written(tmp_path: Path) -> None:
    """The input page's example server (docs/input.md), extracted and run over stdio: its resolver's question reaches the handler."""
    script = tmp_path / "asking_example.py"
    script.write_text(page_example("input"), encoding="utf-8")
    handler, asked = answering(InputAnswer("accept", BOOKING), InputAnswer("accept", {"name": "Ann"}))
    spec = ServerSpec("asking", StdioTransport(sys.executable, (str(script),)), protocol="legacy")
    with trio.fail_after(60):
        async with serving(spec, handler) as handle:
            booked = await handle.call_tool("book", {"hotel": "Grand"})
            greeted = await handle.call_tool("greet", {})
    assert booked.result == {"booked": True, "hotel": "Grand", **BOOKING}
    assert greeted.result == {"greeting": "Hello, Ann!"}
    assert [a.tool for a in asked] == ["book", "greet"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_concurrent_questions_never_reach_the_wrong_call(transport: str) -> None:
    """Two calls ask at once on one handshake-era connection. Streamable HTTP ties each question to its call; over
    stdio a question that arrives while both run cannot be tied, and is refused rather than guessed."""

    async def by_hotel(request: InputRequest) -> InputAnswer:
        day = "2027-01-01" if "Grand" in request.message else "2027-02-02"
        return InputAnswer("accept", BOOKING | {"date": day})

    with trio.fail_after(60):
        async with (
            asking_server(transport) as where,
            serving(ServerSpec("asking", where, protocol="legacy"), by_hotel) as h,
        ):
            outcomes: dict[str, Any] = {}

            async def book(hotel: str) -> None:
                outcomes[hotel] = await h.call_tool("book", {"hotel": hotel})

            async with trio.open_nursery() as nursery:
                nursery.start_soon(book, "Grand")
                nursery.start_soon(book, "Plaza")
    for hotel, day in (("Grand", "2027-01-01"), ("Plaza", "2027-02-02")):
        outcome = outcomes[hotel]
        if outcome.ok:
            assert (outcome.result["hotel"], outcome.result["date"]) == (hotel, day)
        else:
            assert transport == "stdio", outcome
            assert outcome.kind is ErrorKind.TOOL_ERROR
    if transport == "http":
        assert all(o.ok for o in outcomes.values())
