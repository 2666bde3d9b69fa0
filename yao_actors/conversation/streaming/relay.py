"""The delta relay: one model call's stream of deltas → TEXT_MESSAGE_*, REASONING_MESSAGE_* and TOOL_CALL_* events.

Tool calls get their id here, as the model's message is taken in: the model's
own id when it is new in the run, else a fresh ``call_<n>`` (a model may send an
empty id, or reuse one), the same id in the events, the history and the results.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

import attrs

from yao_actors.events import RunEvents
from yao_actors.models.base import Completion, Delta, ReasoningDelta, TextDelta, ToolCallDelta


@attrs.define(eq=False)
class _CallStream:
    id: str | None = None
    name: str | None = None
    arguments: str = ""
    started: bool = False
    ended: bool = False


@attrs.define(eq=False)
class DeltaRelay:
    """Turns one model call's deltas into TEXT_MESSAGE_*, REASONING_MESSAGE_* and TOOL_CALL_* events.

    ``finish`` fills in what a model did not stream (a non-streaming model
    still produces the same events) and closes everything still open.
    """

    events: RunEvents
    new_message_id: Callable[[], str]
    unique_call_id: Callable[[str | None], str]
    text_id: str | None = None
    reasoning_id: str | None = None
    calls: dict[int, _CallStream] = attrs.field(factory=dict)

    async def on_delta(self, delta: Delta) -> None:
        if isinstance(delta, TextDelta):
            await self._text(delta.text)
        elif isinstance(delta, ReasoningDelta):
            if self.reasoning_id is None:
                message_id = self.new_message_id()
                await self.events.reasoning_start(message_id)
                self.reasoning_id = message_id
            await self.events.reasoning_content(self.reasoning_id, delta.text)
        elif isinstance(delta, ToolCallDelta):
            await self._tool_call(delta)

    async def _text(self, text: str) -> None:
        if self.text_id is None:
            message_id = self.new_message_id()
            await self.events.text_start(message_id)
            self.text_id = message_id
        await self.events.text_content(self.text_id, text)

    async def _tool_call(self, delta: ToolCallDelta) -> None:
        stream = self.calls.setdefault(delta.index, _CallStream())
        if stream.id is None and delta.id:
            stream.id = self.unique_call_id(delta.id)
        stream.name = stream.name or delta.name
        stream.arguments += delta.arguments
        if not stream.started and stream.id and stream.name:
            await self.events.tool_call_start(stream.id, stream.name, parent_message_id=self.text_id)
            stream.started = True
        if stream.started and stream.arguments and stream.id:
            arguments, stream.arguments = stream.arguments, ""
            await self.events.tool_call_args(stream.id, arguments)

    async def finish(self, completion: Completion) -> Completion:
        """Announce what was not streamed, close everything; ``completion`` with the ids its events used."""
        if self.text_id is None and completion.text:
            await self._text(completion.text)
        calls = []
        for index, call in enumerate(completion.tool_calls):
            stream = self.calls.get(index)
            if stream is None:
                # Not streamed (a model that does not stream): announced now, whole.
                call_id = self.unique_call_id(call.id)
                stream = self.calls[index] = _CallStream(call_id, call.name)
                if call.name:
                    await self.events.tool_call_start(call_id, call.name, parent_message_id=self.text_id)
                    stream.started = True
                    if call.arguments:
                        await self.events.tool_call_args(call_id, call.arguments)
            elif not stream.started:
                # Streamed without an id: announced now, under an id of its own.
                stream.id = stream.id or self.unique_call_id(call.id)
                await self._tool_call(ToolCallDelta(index=index, name=call.name))
            call_id = stream.id or call.id
            calls.append(call if call_id == call.id else attrs.evolve(call, id=call_id))
        await self.close()
        if all(given is kept for given, kept in zip(completion.tool_calls, calls, strict=True)):
            return completion  # every call kept the model's id (the usual case): nothing to copy
        return attrs.evolve(completion, tool_calls=tuple(calls))

    async def close(self) -> None:
        """End every message and tool call still open."""
        if self.reasoning_id is not None:
            await self.events.reasoning_end(self.reasoning_id)
            self.reasoning_id = None
        if self.text_id is not None:
            await self.events.text_end(self.text_id)
            self.text_id = None
        for stream in self.calls.values():
            if stream.started and not stream.ended and stream.id:
                await self.events.tool_call_end(stream.id)
                stream.ended = True

    def forget_unseen(self, opened: Collection[tuple[str, str | None]]) -> None:
        """Forget the messages and tool calls whose opening event nobody saw (``opened``: the ``(type, id)`` of
        the events shown): :meth:`close` then ends only those that were seen."""
        if ("TEXT_MESSAGE_START", self.text_id) not in opened:
            self.text_id = None
        if ("REASONING_MESSAGE_START", self.reasoning_id) not in opened:
            self.reasoning_id = None
        for stream in self.calls.values():
            if ("TOOL_CALL_START", stream.id) not in opened:
                stream.started = False
