"""A stand-in for ``Runtime.open_run`` so the front end can be tested without models or MCP servers.

What a run does is chosen by the content of its last message:

- ``hold:<name>`` — start, then wait until :meth:`FakeRuntime.release` is called with ``name``, then answer;
- ``flood:<n>`` — stream ``n`` text deltas of 64 KiB each (for backpressure tests);
- anything else — answer ``echo: <content>`` in a few deltas, with one tool call when it mentions ``weather``.

The fake records every run it started, which runs ended, and which were cancelled (left early by the front
end, as the real runtime cancels a run whose context is left), and leaves the terminal event of a cancelled
run to the front end.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio
from ag_ui.core import ToolCallResultEvent

from yao_actors.errors import RunError
from yao_actors.events import RunEvents


@attrs.define(eq=False)
class FakeRuntime:
    """The ``open_run`` surface of a runtime, scripted by message content."""

    assistants: frozenset[str] = frozenset({"default"})
    started: list[str] = attrs.field(factory=list)
    cancelled: list[str] = attrs.field(factory=list)
    finished: list[str] = attrs.field(factory=list)
    sent: dict[str, int] = attrs.field(factory=dict)
    threads: list[str | None] = attrs.field(factory=list)
    _gates: dict[str, trio.Event] = attrs.field(factory=dict)

    def release(self, name: str) -> None:
        """Let the ``hold:<name>`` runs answer."""
        self._gate(name).set()

    def _gate(self, name: str) -> trio.Event:
        return self._gates.setdefault(name, trio.Event())

    @asynccontextmanager
    async def open_run(
        self,
        assistant: str,
        messages: list[dict[str, Any]],
        *,
        thread_id: str | None = None,
        run_id: str | None = None,
    ) -> AsyncIterator[trio.MemoryReceiveChannel[dict[str, Any]]]:
        if assistant not in self.assistants:
            raise RunError(f"unknown assistant {assistant!r}", code="unknown_assistant")
        run_id = run_id or f"run-{len(self.started)}"
        self.started.append(run_id)
        self.threads.append(thread_id)
        send, receive = trio.open_memory_channel[dict[str, Any]](0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._play, send, run_id, thread_id or f"thread-{run_id}", messages[-1]["content"])
            try:
                yield receive
            finally:
                nursery.cancel_scope.cancel()

    async def _play(
        self, send: trio.MemorySendChannel[dict[str, Any]], run_id: str, thread_id: str, content: str
    ) -> None:
        async def counted(event: dict[str, Any]) -> None:
            await send.send(event)
            self.sent[run_id] = self.sent.get(run_id, 0) + 1

        events = RunEvents(run_id=run_id, thread_id=thread_id, send=counted)
        try:
            async with send:
                await events.run_started()
                await self._answer(events, content)
                await events.run_finished({"text": content})
                self.finished.append(run_id)
        except trio.Cancelled:
            self.cancelled.append(run_id)
            raise

    async def _answer(self, events: RunEvents, content: str) -> None:
        kind, _, argument = content.partition(":")
        if kind == "hold":
            await self._gate(argument).wait()
        if kind == "flood":
            await events.text_start("m1")
            for _ in range(int(argument)):
                await events.text_content("m1", "x" * 65536)
            await events.text_end("m1")
            return
        if "weather" in content:
            await events.tool_call_start("call-1", "weather__get")
            await events.tool_call_args("call-1", '{"city": "Beijing"}')
            await events.tool_call_end("call-1")
            await events.emit(
                ToolCallResultEvent(message_id="r1", tool_call_id="call-1", content='{"temp": 21}', role="tool")
            )
        await events.text_start("m1")
        for part in ("echo: ", content[: len(content) // 2], content[len(content) // 2 :]):
            await events.text_content("m1", part)
        await events.text_end("m1")
