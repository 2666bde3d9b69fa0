"""Helpers the test modules share: a conversation manager over given servers, the stream check, server statistics."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import mcp
import pytest

from yao_actors.conversation import ConversationManager, open_conversations
from yao_actors.events import EventDict, parse_event
from yao_actors.models.base import Model
from yao_actors.specs import AssistantSpec, ServerSpec
from yao_actors.testing.redis_server import REDIS_SERVER
from yao_actors.tools.server_handle import ServerHandle
from yao_actors.tools.tool_server import ToolServer
from yao_actors.transports import Connector, Link, open_client

#: CI (``bash .ci/run`` sets ``CI=true``) installs every system tool the tests start: none of them may be skipped there.
IN_CI = os.environ.get("CI") == "true"

needs_redis = pytest.mark.skipif(
    REDIS_SERVER is None and not IN_CI, reason="redis-server is not installed (.ci/run installs it)"
)
"""Marks a test that starts a real ``redis-server`` (skipped without one, except in CI, where it fails)."""


def require_tool(path: str | None, name: str) -> None:
    """Skip the calling test when the system tool ``name`` is missing (``path`` is ``None``); in CI, fail it."""
    if path is None:
        message = f"{name} is not installed (.ci/run installs it)"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)


@asynccontextmanager
async def open_manager(
    servers: Mapping[str, ToolServer], model: Model, *assistants: AssistantSpec, **limits: int
) -> AsyncIterator[ConversationManager]:
    """Conversations of ``assistants`` over ``servers``, every assistant's model being ``model`` (id ``"m"``).

    ``limits`` are :func:`~yao_actors.conversation.open_conversations`' (``max_threads``, ``max_thread_bytes``, ...).
    """
    async with open_conversations({a.id: a for a in assistants}, servers, {"m": model}, **limits) as manager:
        yield manager


#: What opens a span of the stream, what closes it, and the field naming it.
SPANS = {
    "STEP_STARTED": (("STEP_FINISHED",), "stepName"),
    "TEXT_MESSAGE_START": (("TEXT_MESSAGE_END",), "messageId"),
    "REASONING_MESSAGE_START": (("REASONING_MESSAGE_END",), "messageId"),
    "TOOL_CALL_START": (("TOOL_CALL_END",), "toolCallId"),
    "SUBAGENT_STARTED": (("SUBAGENT_FINISHED", "SUBAGENT_ERROR"), "subagentRunId"),
}
CLOSERS = {closer: (opener, field) for opener, (closers, field) in SPANS.items() for closer in closers}


def check_stream(events: Sequence[EventDict]) -> None:
    """Every event parses, seq is strictly increasing, exactly the last one is terminal, every span is closed."""
    for event in events:
        parse_event(event)
    assert [event["seq"] for event in events] == list(range(1, len(events) + 1))
    terminal = [i for i, event in enumerate(events) if event["type"] in ("RUN_FINISHED", "RUN_ERROR")]
    assert terminal == [len(events) - 1]
    assert events[0]["type"] == "RUN_STARTED"
    open_spans: set[tuple[str, str]] = set()
    for event in events:
        if event["type"] in SPANS:
            span = (event["type"], event[SPANS[event["type"]][1]])
            assert span not in open_spans
            open_spans.add(span)
        elif event["type"] in CLOSERS:
            opener, field = CLOSERS[event["type"]]
            open_spans.remove((opener, event[field]))
    assert not open_spans, f"left open: {open_spans}"


def app_activity_after_result(events: Sequence[EventDict]) -> tuple[int, EventDict]:
    """The event right after the run's first ``TOOL_CALL_RESULT``, checked to be an MCP Apps activity snapshot that
    replaces: the result's index, and the activity."""
    kinds = [event["type"] for event in events]
    at = kinds.index("TOOL_CALL_RESULT")
    assert kinds[at + 1] == "ACTIVITY_SNAPSHOT"
    activity = events[at + 1]
    assert activity["activityType"] == "mcp-apps"
    assert activity["replace"] is True
    return at, activity


async def server_stats(handle: ServerHandle) -> dict[str, object]:
    """The ``stats`` tool of ``yao_actors.testing.servers``: executions per tool, and how many were cancelled."""
    outcome = await handle.call_tool("stats", {})
    assert isinstance(outcome.result, dict), outcome
    return outcome.result


def noting_connector(note: Callable[[ServerSpec, Mapping[str, Any]], object]) -> Connector:
    """The real connector, telling ``note`` of each connection (the server's spec and the connect options) first:
    for tests that check which servers were connected, and with what."""

    @asynccontextmanager
    async def connect(spec: ServerSpec, *, link: Link, **kwargs: Any) -> AsyncIterator[mcp.Client]:
        note(spec, kwargs)
        async with open_client(spec, link=link, **kwargs) as client:
            yield client

    return connect
