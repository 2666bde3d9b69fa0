"""A stand-in for ``Runtime.open_run`` (given a whole ``RunRequest``) so the front end can be tested without models or MCP servers.

What a run does is chosen by the content of its last message:

- ``hold:<name>`` — start, then wait until :meth:`FakeRuntime.release` is called with ``name``, then answer;
- ``flood:<n>`` — stream ``n`` text deltas of 64 KiB each (for backpressure tests);
- ``vanish`` — start, then end without a terminal event (a broken runtime);
- ``crash`` — ``open_run`` raises an arbitrary exception (a bug in the runtime);
- ``uncancellable:<name>`` — as ``hold:<name>``, but the stream's ``cancel`` raises (a bug the front end meets
  in its own task, outside any run);
- ``unencodable`` — start, then send an event that cannot be serialised as JSON;
- anything else — answer ``echo: <content>`` in a few deltas, with one tool call when it mentions ``weather``.

The fake records every run it started, which ended, and which were cancelled — through ``stream.cancel()``
(the run still ends with ``RUN_FINISHED`` outcome ``cancelled``, as the real runtime does) or by the front end
leaving the run's context early.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio
from ag_ui.core import ToolCallResultEvent

from yao_actors.conversation import RunRequest, ThreadHistory
from yao_actors.errors import RunError, RunErrorCode
from yao_actors.events import RunEvents, SendEvent
from yao_actors.tools.catalog import Catalog


@attrs.define(eq=False)
class FakeRuntime:
    """The ``open_run`` surface of a runtime, scripted by message content."""

    assistants: frozenset[str] = frozenset({"default"})
    started: list[str] = attrs.field(factory=list)
    cancelled: list[str] = attrs.field(factory=list)
    finished: list[str] = attrs.field(factory=list)
    sent: dict[str, int] = attrs.field(factory=dict)
    thread_ids: list[str] = attrs.field(factory=list)
    stored_runs: set[str] = attrs.field(factory=set)
    #: What :meth:`store_problem` says (``None``: the store can take calls).
    store_down: str | None = None
    _gates: dict[str, trio.Event] = attrs.field(factory=dict)

    async def history(self, thread_id: str, *, principal: str | None = None) -> Any:
        """No thread is stored here: every history is an empty snapshot."""
        await trio.lowlevel.checkpoint()
        return ThreadHistory(thread_id, (), ())

    async def threads(self, *, principal: str | None = None, limit: int = 100) -> list[Any]:
        await trio.lowlevel.checkpoint()
        return []

    async def forget(self, thread_id: str, *, principal: str | None = None) -> bool:
        await trio.lowlevel.checkpoint()
        return False

    @asynccontextmanager
    async def open_resume(self, run_id: str, *, after_seq: int = 0, principal: str | None = None) -> AsyncIterator[Any]:
        """No run is stored here: every resume is of an unknown run."""
        await trio.lowlevel.checkpoint()
        raise RunError(f"unknown run {run_id!r}", code=RunErrorCode.UNKNOWN_RUN)
        yield  # pragma: no cover

    @property
    def sources(self) -> dict[str, Any]:
        """No MCP server: ``/readyz`` reports none (tests give their own to the service)."""
        return {}

    def store_problem(self) -> str | None:
        return self.store_down

    @property
    def authorizations(self) -> None:
        """No server behind OAuth per principal: no ``/oauth/callback``."""
        return None

    async def tools_not_offered(self) -> dict[str, dict[str, str]]:
        await trio.lowlevel.checkpoint()
        return {}

    async def catalog(self, assistant: str) -> Catalog:
        """Each of :attr:`assistants` is offered no tool; another is unknown (``KeyError``, as a runtime's)."""
        await trio.lowlevel.checkpoint()
        if assistant not in self.assistants:
            raise KeyError(assistant)
        return Catalog()

    async def run_exists(self, run_id: str) -> bool:
        """Every run the fake started counts as stored (``stored_runs`` adds others)."""
        await trio.lowlevel.checkpoint()
        return run_id in self.started or run_id in self.stored_runs

    def release(self, name: str) -> None:
        """Let the ``hold:<name>`` runs answer."""
        self._gate(name).set()

    def _gate(self, name: str) -> trio.Event:
        return self._gates.setdefault(name, trio.Event())

    @asynccontextmanager
    async def open_run(self, request: RunRequest, /) -> AsyncIterator[FakeStream]:
        if request.assistant not in self.assistants:
            raise RunError(f"unknown assistant {request.assistant!r}", code=RunErrorCode.UNKNOWN_ASSISTANT)
        messages, run_id, thread_id = request.messages, request.run_id, request.thread_id
        if messages[-1]["content"] == "crash":
            raise ZeroDivisionError("a bug in the runtime")
        self.started.append(run_id)
        self.thread_ids.append(thread_id)
        send, receive = trio.open_memory_channel[dict[str, Any]](0)
        stream = FakeStream(receive, broken_cancel=messages[-1]["content"].startswith("uncancellable:"))
        events = RunEvents(run_id=run_id, thread_id=thread_id, send=self._counted(send, run_id))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._play, send, events, stream.scope, messages[-1]["content"], stream.done)
            try:
                yield stream
            finally:
                nursery.cancel_scope.cancel()

    def _counted(self, send: trio.MemorySendChannel[dict[str, Any]], run_id: str) -> SendEvent:
        """``send`` counting what it sent."""

        async def counted(event: dict[str, Any]) -> None:
            await send.send(event)
            self.sent[run_id] = self.sent.get(run_id, 0) + 1

        return counted

    async def _play(
        self,
        send: trio.MemorySendChannel[dict[str, Any]],
        events: RunEvents,
        scope: trio.CancelScope,
        content: str,
        done: trio.Event,
    ) -> None:
        try:
            async with send:
                with scope:
                    await events.run_started()
                    await self._answer(events, content)
                if scope.cancelled_caught:
                    self.cancelled.append(events.run_id)
                    await events.run_finished(None, cancelled=True)
                elif content != "vanish":
                    self.finished.append(events.run_id)
                    await events.run_finished({"text": content})
        except trio.Cancelled:
            if events.run_id not in self.cancelled:
                self.cancelled.append(events.run_id)
            raise
        finally:
            done.set()

    async def _answer(self, events: RunEvents, content: str) -> None:
        kind, _, argument = content.partition(":")
        if kind in ("hold", "uncancellable"):
            await self._gate(argument).wait()
        if kind == "unencodable":
            await events.emit_dict({"type": "CUSTOM", "name": "unencodable", "value": object()})
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


class FakeStream:
    """The stream of a fake run: its events, and ``cancel`` (the run still ends with its terminal event)."""

    def __init__(self, receive: trio.MemoryReceiveChannel[dict[str, Any]], *, broken_cancel: bool = False) -> None:
        self._receive = receive
        self._broken_cancel = broken_cancel
        self.scope = trio.CancelScope()
        self.done = trio.Event()

    async def wait_done(self) -> None:
        """Return once the run has ended."""
        await self.done.wait()

    def cancel(self) -> None:
        if self._broken_cancel:
            raise RuntimeError("a bug behind cancel")
        self.scope.cancel()

    def __aiter__(self) -> FakeStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    def receive_nowait(self) -> dict[str, Any]:
        return self._receive.receive_nowait()

    async def receive(self) -> dict[str, Any]:
        return await self._receive.receive()
