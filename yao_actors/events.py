"""AG-UI 1.0 events of a run, built with the ``ag_ui.core`` models.

A run's stream::

    RUN_STARTED
      STEP_STARTED                      one step per model call
        TEXT_MESSAGE_START/CONTENT/END  text deltas as the model streams them
        TOOL_CALL_START/ARGS/END        tool-call deltas as the model streams them
      STEP_FINISHED
      TOOL_CALL_RESULT                  as each call finishes, not at the end of the batch
      ACTIVITY_SNAPSHOT                 right after the result of a tool with an interface (MCP Apps)
      CUSTOM                            tool_progress, tool_retry, sequential_retry, server_status, usage
      SUBAGENT_STARTED ... SUBAGENT_FINISHED | SUBAGENT_ERROR   around the fallback assistant
    RUN_FINISHED | RUN_ERROR            exactly one terminal event

:class:`RunEvents` is the emitter of one run. Each event is the camelCase,
JSON-ready dict of its ``ag_ui`` model (the model's own serialisation: keys by
alias, optional fields without a value left out), with the run's ``runId`` and a
per-run, strictly increasing ``seq`` added. The emitter's helpers write these
dicts directly rather than building and dumping a pydantic model for each event,
which cost more than the rest of the loop's work per turn; :func:`parse_event`
checks them, in the tests for every event of every run, and in the emitter
itself when ``validate`` is on (debugging: ``YAO_ACTORS_VALIDATE_EVENTS=1``). An
``ag_ui`` model can still be emitted as it is (:meth:`RunEvents.emit`). The
emitter refuses a second terminal event and any event after the first, so
"exactly one terminal event" holds by construction. :func:`parse_event` turns an
event dict back into its ``ag_ui`` model (for tests and the chat client).
"""

from __future__ import annotations

import contextlib
import enum
import os
import time
import typing
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import attrs
import pydantic
import trio
from ag_ui.core import BaseEvent, Event

from yao_actors.errors import RunErrorCode, StreamClosedError
from yao_actors.models.base import Usage
from yao_actors.store.records import EncodedEvent
from yao_actors.tasks import Turnstile
from yao_actors.tools.media import event_media
from yao_actors.tools.results import ToolCallResult, tool_message_content
from yao_actors.untrusted.json import encode_json as encode_json  # how events go on the wire, re-exported

DEFAULT_MEDIA_BYTES = 1 << 20
"""The base64 data of images and audio one ``TOOL_CALL_RESULT`` carries at most (the service's ``max_frame_bytes``)."""

EventDict = dict[str, Any]
"""An event as it goes on the wire: camelCase keys, JSON-ready values, ``runId`` and ``seq``."""


class WireEvent(dict[str, Any]):
    """An emitted event: its dict, and the JSON text it goes out as, made once (:meth:`encoded`).

    What :class:`RunEvents` sends. The websocket writes the text and the run's journal stores the same text,
    so an event is encoded once however many consumers it has. The text is made on the first call and kept:
    an emitted event is complete, and nothing changes it afterwards (a change would not be in the text).
    """

    __slots__ = ("_text",)
    _text: str

    def encoded(self) -> str:
        """The event as compact JSON (:func:`encode_json`), made on the first call."""
        text: str | None = getattr(self, "_text", None)  # a default, not a raised AttributeError, the first time
        if text is None:
            text = self._text = encode_json(self)
        return text


def encoded_event(event: Mapping[str, Any]) -> str:
    """The JSON text of an event: the one a :class:`WireEvent` already has, or :func:`encode_json`'s."""
    if type(event) is WireEvent:
        return event.encoded()
    return encode_json(event)


def stored_events(events: Iterable[Mapping[str, Any]]) -> list[EncodedEvent]:
    """Events as a store takes them: each one's ``seq`` and the text it went on the wire as (encoded once)."""
    return [EncodedEvent(event["seq"], encoded_event(event)) for event in events]


SendEvent = Callable[[EventDict], Awaitable[None]]
"""Where an emitter delivers events: an async callable, e.g. a bounded memory channel's ``send``."""

TERMINAL_TYPES = frozenset({"RUN_FINISHED", "RUN_ERROR"})


class CustomName(enum.StrEnum):
    """The names of this project's ``CUSTOM`` events."""

    TOOL_PROGRESS = "tool_progress"
    TOOL_RETRY = "tool_retry"
    SEQUENTIAL_RETRY = "sequential_retry"
    SERVER_STATUS = "server_status"
    USAGE = "usage"


class Outcome(enum.StrEnum):
    """How a run ended; for ``RUN_FINISHED``, ``result.outcome`` of that event.

    ``answered``: the assistant answered. ``fallback``: the tool loop failed and
    the fallback assistant answered. ``degraded``: the fallback failed too, the
    run finished with what it had. ``data``: a ``next`` hook returned data.
    ``cancelled``: the run was cancelled (the AG-UI outcome is ``cancelled``).
    ``client_tools``: the model called tools of the client, which answers them in the next run (the AG-UI
    outcome is ``success`` with ``pendingToolCallIds``). ``interrupt``: calls wait for a person's approval
    (the AG-UI outcome is ``interrupt`` with its ``interrupts``).
    ``error``: the run ended with ``RUN_ERROR``.
    """

    ANSWERED = "answered"
    FALLBACK = "fallback"
    DEGRADED = "degraded"
    DATA = "data"
    CANCELLED = "cancelled"
    CLIENT_TOOLS = "client_tools"
    INTERRUPT = "interrupt"
    ERROR = "error"


_EVENT_ADAPTER: pydantic.TypeAdapter[Event] = pydantic.TypeAdapter(Event)


def parse_event(data: EventDict) -> Event:
    """Validate a wire dict back into its ``ag_ui`` model; ``runId`` and ``seq`` stay as extras.

    Raises ``pydantic.ValidationError`` when the dict is not a valid AG-UI event.
    """
    return _EVENT_ADAPTER.validate_python(data)


def _attributable_types() -> frozenset[str]:
    """The event types whose ``ag_ui`` model has an optional ``subagentRunId`` (its ``Attributable`` part)."""
    union = typing.get_args(Event)[0]
    return frozenset(
        model.model_fields["type"].default.value
        for model in typing.get_args(union)
        if (field := model.model_fields.get("subagent_run_id")) is not None and not field.is_required()
    )


ATTRIBUTABLE_TYPES = _attributable_types()
"""Event types that carry ``subagentRunId`` while :meth:`RunEvents.attributed_to` is active."""

VALIDATE_EVENTS = os.environ.get("YAO_ACTORS_VALIDATE_EVENTS", "") not in ("", "0")
"""The default of ``RunEvents.validate``: check every event with :func:`parse_event` before it is sent."""


def token_usage(usage: Usage, model: str | None = None) -> dict[str, Any]:
    """The AG-UI ``TokenUsage`` dict of a :class:`Usage` (``model`` left out when unknown)."""
    value: dict[str, Any] = {} if model is None else {"model": model}
    value["inputTokens"] = usage.prompt_tokens
    value["outputTokens"] = usage.completion_tokens
    value["totalTokens"] = usage.total_tokens
    return value


def _usage_value(usage: Usage) -> dict[str, int]:
    return {
        "promptTokens": usage.prompt_tokens,
        "completionTokens": usage.completion_tokens,
        "totalTokens": usage.total_tokens,
    }


def _with(data: EventDict, **optional: Any) -> EventDict:
    """``data`` with the optional fields that have a value (an ``ag_ui`` model leaves the others out)."""
    data.update((key, value) for key, value in optional.items() if value is not None)
    return data


def _as_send(target: SendEvent | trio.MemorySendChannel[EventDict]) -> SendEvent:
    if isinstance(target, trio.MemorySendChannel):
        return target.send
    return target


# on_setattr: no converter runs on every ``seq += 1``.
@attrs.define(eq=False, on_setattr=attrs.setters.NO_OP)
class RunEvents:
    """The event emitter of one run.

    ``send`` is awaited for every event (an async callable, or a bounded
    ``trio.MemorySendChannel`` whose ``send`` is used), so a slow consumer slows
    the run instead of growing a buffer. While :meth:`attributed_to` is active,
    events that may carry a ``subagentRunId`` carry it. With ``validate``, every
    event is checked with :func:`parse_event` before it is sent (an invalid one
    raises ``pydantic.ValidationError``: a bug here, not in the caller's data).
    Values given to the helpers (``result``, ``value``) must be JSON-ready.
    """

    run_id: str
    thread_id: str
    _send: SendEvent = attrs.field(converter=_as_send, alias="send")
    validate: bool = attrs.field(default=VALIDATE_EVENTS, kw_only=True)
    seq: int = attrs.field(default=0, kw_only=True)
    """The ``seq`` of the last event emitted: the next one is numbered after it (an emitter that writes after
    events someone else sent starts from theirs)."""
    terminal: EventDict | None = attrs.field(default=None, init=False)
    _subagent_run_id: str | None = attrs.field(default=None, init=False)
    _turnstile: Turnstile = attrs.field(factory=Turnstile, init=False)

    @property
    def finished(self) -> bool:
        """Whether the terminal event has been sent."""
        return self.terminal is not None

    def reopen(self, seq: int) -> None:
        """Number the next event ``seq + 1``, taking the terminal event back if there is one: for a run whose events
        after ``seq`` nobody saw, because its store refused them; what it emits next (its close-out, another
        terminal event) follows ``seq``."""
        self.terminal = None
        self.seq = seq

    @contextlib.contextmanager
    def attributed_to(self, subagent_run_id: str) -> Iterator[None]:
        """Attribute the events emitted inside the block to a subagent invocation."""
        previous, self._subagent_run_id = self._subagent_run_id, subagent_run_id
        try:
            yield
        finally:
            self._subagent_run_id = previous

    async def emit(self, event: BaseEvent) -> WireEvent:
        """Emit an ``ag_ui`` model (validated when it was built); returns the dict that was sent."""
        return await self.emit_dict(event.model_dump(by_alias=True, exclude_none=True, mode="json"))

    async def emit_dict(self, data: EventDict) -> WireEvent:
        """Number, stamp and send one event dict; returns the :class:`WireEvent` sent (``data`` completed).

        Emission is all or nothing: an event whose delivery was cancelled uses
        no ``seq`` number (the numbers a consumer sees have no gaps), and a
        terminal event whose delivery was cancelled does not close the stream,
        so the run can still send its one terminal event. Events emitted from
        several tasks are sent one at a time, in order.
        """
        kind = data["type"]
        if self.terminal is not None:
            raise self._closed(kind)
        if self._subagent_run_id is not None and kind in ATTRIBUTABLE_TYPES:
            data.setdefault("subagentRunId", self._subagent_run_id)
        # The turnstile only matters when another task is in the middle of a send; when it is
        # free, passing it costs nothing, not even an await (the send checkpoints).
        turnstile = self._turnstile
        if not turnstile.pass_free():
            await turnstile.enter()
        try:
            if self.terminal is not None:
                raise self._closed(kind)
            data["timestamp"] = int(time.time() * 1000)
            data["runId"] = self.run_id
            data["seq"] = self.seq + 1
            if self.validate:
                parse_event(data)
            event = WireEvent(data)
            await self._send(event)
            self.seq += 1
            if kind in TERMINAL_TYPES:
                self.terminal = event
        finally:
            turnstile.leave()
        return event

    def _closed(self, kind: str) -> StreamClosedError:
        """The error of an event emitted after the terminal one."""
        return StreamClosedError(f"run {self.run_id}: {kind} after the terminal event")

    # ------------------------------------------------------------------ lifecycle

    async def run_started(self) -> EventDict:
        return await self.emit_dict({"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id})

    async def run_finished(
        self,
        result: Any,
        *,
        cancelled: bool = False,
        usage: Usage | None = None,
        model: str | None = None,
        pending_tool_call_ids: Sequence[str] = (),
        interrupts: Sequence[dict[str, Any]] = (),
    ) -> EventDict:
        """The terminal event of a run that ended without an error (also when cancelled).

        ``pending_tool_call_ids``: calls of client tools the run left for its client to answer;
        ``interrupts``: AG-UI ``Interrupt`` objects the run waits on (the outcome is then ``interrupt``).
        """
        data: EventDict = {"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.run_id}
        _with(data, result=result)
        data["outcome"] = {"type": "cancelled" if cancelled else "success"}
        if pending_tool_call_ids:
            data["outcome"]["pendingToolCallIds"] = list(pending_tool_call_ids)
        if interrupts and not cancelled:
            data["outcome"] = {"type": "interrupt", "interrupts": list(interrupts)}
        if usage is not None:
            data["usage"] = [token_usage(usage, model)]
        return await self.emit_dict(data)

    async def run_error(
        self, message: str, *, code: RunErrorCode, usage: Usage | None = None, model: str | None = None
    ) -> EventDict:
        """The terminal event of a run that failed."""
        data: EventDict = {"type": "RUN_ERROR", "message": message, "code": code}
        if usage is not None:
            data["usage"] = [token_usage(usage, model)]
        return await self.emit_dict(data)

    async def step_started(self, name: str) -> EventDict:
        return await self.emit_dict({"type": "STEP_STARTED", "stepName": name})

    async def step_finished(self, name: str) -> EventDict:
        return await self.emit_dict({"type": "STEP_FINISHED", "stepName": name})

    # ------------------------------------------------------------------ model stream

    async def text_start(self, message_id: str) -> EventDict:
        return await self.emit_dict({"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"})

    async def text_content(self, message_id: str, delta: str) -> EventDict:
        return await self.emit_dict({"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": delta})

    async def text_end(self, message_id: str) -> EventDict:
        return await self.emit_dict({"type": "TEXT_MESSAGE_END", "messageId": message_id})

    async def reasoning_start(self, message_id: str) -> EventDict:
        return await self.emit_dict({"type": "REASONING_MESSAGE_START", "messageId": message_id, "role": "reasoning"})

    async def reasoning_content(self, message_id: str, delta: str) -> EventDict:
        return await self.emit_dict({"type": "REASONING_MESSAGE_CONTENT", "messageId": message_id, "delta": delta})

    async def reasoning_end(self, message_id: str) -> EventDict:
        return await self.emit_dict({"type": "REASONING_MESSAGE_END", "messageId": message_id})

    async def tool_call_start(self, call_id: str, name: str, *, parent_message_id: str | None = None) -> EventDict:
        data = {"type": "TOOL_CALL_START", "toolCallId": call_id, "toolCallName": name}
        return await self.emit_dict(_with(data, parentMessageId=parent_message_id))

    async def tool_call_args(self, call_id: str, delta: str) -> EventDict:
        return await self.emit_dict({"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": delta})

    async def tool_call_end(self, call_id: str) -> EventDict:
        return await self.emit_dict({"type": "TOOL_CALL_END", "toolCallId": call_id})

    # ------------------------------------------------------------------ tools

    async def tool_call_result(
        self, message_id: str, result: ToolCallResult, *, media_bytes: int = DEFAULT_MEDIA_BYTES
    ) -> EventDict:
        """A call's result, with the content the model gets and the details in ``metadata``: its images and
        audio in ``media``, with their base64 data up to ``media_bytes`` in all (past it, their size only)."""
        metadata: dict[str, Any] = {
            "server": result.server,
            "tool": result.tool,
            "durationMs": round(result.duration * 1000, 3),
        }
        if result.kind is not None:
            metadata["kind"] = result.kind.value
            metadata["retryable"] = result.retryable
        if result.repaired:
            metadata["repaired"] = True
        if result.sequential_retry:
            metadata["sequentialRetry"] = True
        if result.structured:
            metadata["structured"] = True
        if result.title:
            metadata["title"] = result.title
        if result.reconnected:
            metadata["reconnected"] = True
        media = event_media(result.result, media_bytes) if result.error is None and result.rich else []
        if media:
            metadata["media"] = media
        return await self.emit_dict(
            {
                "type": "TOOL_CALL_RESULT",
                "metadata": metadata,
                "messageId": message_id,
                "toolCallId": result.call_id,
                "content": tool_message_content(result),
                "role": "tool",
            }
        )

    async def activity_snapshot(self, message_id: str, activity_type: str, content: dict[str, Any]) -> EventDict:
        """An activity as a whole (``replace: true``): an app's tool call, for the client to render."""
        data = {"type": "ACTIVITY_SNAPSHOT", "messageId": message_id, "activityType": activity_type}
        return await self.emit_dict({**data, "content": content, "replace": True})

    async def custom(self, name: CustomName, value: Any) -> EventDict:
        return await self.emit_dict({"type": "CUSTOM", "name": name.value, "value": value})

    async def tool_progress(
        self, call_id: str, progress: float, total: float | None = None, message: str | None = None
    ) -> EventDict:
        value = {"toolCallId": call_id, "progress": progress, "total": total, "message": message}
        return await self.custom(CustomName.TOOL_PROGRESS, value)

    async def tool_retry(self, attempt: int, call_ids: Sequence[str]) -> EventDict:
        """The model is asked to fix the failed calls of execution ``attempt`` (1-based)."""
        return await self.custom(CustomName.TOOL_RETRY, {"attempt": attempt, "toolCallIds": list(call_ids)})

    async def sequential_retry(self, call_ids: Sequence[str]) -> EventDict:
        return await self.custom(CustomName.SEQUENTIAL_RETRY, {"toolCallIds": list(call_ids)})

    async def server_status(
        self,
        server: str,
        state: str,
        detail: str | None = None,
        *,
        protocol: str | None = None,
        tasks: str | None = None,
    ) -> EventDict:
        """A server's tools are not offered, or a call found it unavailable; ``protocol`` its MCP version if known,
        ``tasks`` the MCP tasks design it offers (``"2026-07-28"``, ``"2025-11-25"``) if it offers one."""
        value = _with({"server": server, "state": state, "detail": detail}, protocol=protocol, tasks=tasks)
        return await self.custom(CustomName.SERVER_STATUS, value)

    async def usage(self, usage: Usage, *, model: str | None = None) -> EventDict:
        """The usage of one model call."""
        return await self.custom(CustomName.USAGE, {"model": model, **_usage_value(usage)})

    # ------------------------------------------------------------------ subagents

    async def subagent_started(self, subagent_run_id: str, name: str, *, description: str | None = None) -> EventDict:
        data = {"type": "SUBAGENT_STARTED", "subagentRunId": subagent_run_id, "name": name}
        return await self.emit_dict(_with(data, description=description))

    async def subagent_finished(self, subagent_run_id: str, result: Any = None) -> EventDict:
        data = {"type": "SUBAGENT_FINISHED", "subagentRunId": subagent_run_id}
        return await self.emit_dict(_with(data, result=result))

    async def subagent_error(self, subagent_run_id: str, message: str, *, code: RunErrorCode) -> EventDict:
        return await self.emit_dict(
            {"type": "SUBAGENT_ERROR", "subagentRunId": subagent_run_id, "message": message, "code": code}
        )
