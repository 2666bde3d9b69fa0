"""Spans of runs, model calls and tool calls, after the OpenTelemetry GenAI semantic conventions.

The tree is ``invoke_agent {assistant}`` (a run) → ``chat {model}`` (a model call, the fallback's included)
and ``execute_tool {server__tool}`` (a tool call). Only ``opentelemetry-api`` is needed: when no SDK tracer
provider is installed, :func:`open_span` hands out one shared non-recording span without touching the
context and without making its name or attributes, so tracing costs a function call and an ``isinstance``
(the API's own no-op spans cost some 13 µs each); :func:`attached` of no context does nothing. Callers need
not check :func:`tracing_on` first. An application (or ``yao-actors serve`` with the ``otel`` extra)
installs a provider and spans start recording.

The trace context crosses the actor mailboxes inside the requests: a run order and a tool call request carry
:func:`capture` of the sender's context, and the actor that serves them makes it current
(:func:`open_span`'s ``parent``, :func:`attached`). The MCP SDK's own client span and its W3C
``traceparent`` in the request's ``_meta`` then descend from the ``execute_tool`` span, whichever task runs
the call.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from contextvars import Token
from types import TracebackType
from typing import Final

import trio
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN, NoOpTracerProvider, ProxyTracerProvider, Span, SpanKind, StatusCode
from opentelemetry.util.types import AttributeValue

TRACER_NAME: Final = "yao_actors"

# Attribute names (GenAI semantic conventions, plus this project's own under ``yao.``).
OPERATION: Final = "gen_ai.operation.name"
AGENT_NAME: Final = "gen_ai.agent.name"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
REQUEST_MODEL: Final = "gen_ai.request.model"
INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
ERROR_TYPE: Final = "error.type"
RUN_ID: Final = "yao.run.id"
RUN_OUTCOME: Final = "yao.run.outcome"
STEP: Final = "yao.step"
SERVER: Final = "yao.mcp.server"
SEQUENTIAL_RETRY: Final = "yao.tool.sequential_retry"

Attributes = Mapping[str, AttributeValue]


_OFF: Final = frozenset({ProxyTracerProvider, NoOpTracerProvider})

if "OTEL_PYTHON_TRACER_PROVIDER" in os.environ:
    trace.get_tracer_provider()  # a provider named by the environment is loaded on first use: now


def tracing_on() -> bool:
    """Whether a real tracer provider is installed (spans record).

    Reads the API's global directly: ``trace.get_tracer_provider()`` looks an environment variable up on every
    call while no provider is set, which would be most of what tracing costs when it is off.
    """
    provider = trace._TRACER_PROVIDER
    return provider is not None and type(provider) not in _OFF


_made: list[tuple[trace.TracerProvider, trace.Tracer]] = []


def _tracer() -> trace.Tracer:
    """This package's tracer from the installed provider, made once per provider (making one is not cheap)."""
    provider = trace.get_tracer_provider()
    if not _made or _made[0][0] is not provider:
        _made[:] = [(provider, provider.get_tracer(TRACER_NAME))]
    return _made[0][1]


def capture() -> Context | None:
    """The sender's trace context, to carry in a request to another actor (``None`` while tracing is off)."""
    return otel_context.get_current() if tracing_on() else None


class _Attached:
    """The block of :func:`attached` for a carried context: it is current in this task for the block."""

    __slots__ = ("_carried", "_token")

    def __init__(self, carried: Context) -> None:
        self._carried = carried
        self._token: Token[Context] | None = None

    def __enter__(self) -> None:
        self._token = otel_context.attach(self._carried)

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            otel_context.detach(self._token)


class _Nothing:
    """A block that does nothing: :func:`attached` of no context."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: object) -> None:
        return None


_NOTHING: Final = _Nothing()


def attached(carried: Context | None) -> AbstractContextManager[None]:
    """``with attached(carried):`` makes a carried context (:func:`capture`) current in this task for the block.

    ``None`` (what :func:`capture` gives while tracing is off) makes it a shared block that does nothing, so a
    caller need not check.
    """
    return _NOTHING if carried is None else _Attached(carried)


class NoSpan:
    """``with NO_SPAN as span:`` — what :func:`open_span` is while tracing is off: ``span`` is the invalid span."""

    __slots__ = ()

    def __enter__(self) -> Span:
        return INVALID_SPAN

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        return None


NO_SPAN: Final = NoSpan()
"""The span block that records nothing: :func:`open_span` while tracing is off."""


class SpanBlock:
    """The block of :func:`open_span` while spans record: a span, current for the block."""

    __slots__ = ("_attributes", "_kind", "_name", "_parent", "_span", "_token")

    def __init__(self, name: str, attributes: Attributes | None, kind: SpanKind, parent: Context | None) -> None:
        self._name = name
        self._attributes = attributes
        self._kind = kind
        self._parent = parent
        self._span: Span = INVALID_SPAN
        self._token: Token[Context] | None = None

    def __enter__(self) -> Span:
        parent = self._parent if self._parent is not None else otel_context.get_current()
        self._span = _tracer().start_span(self._name, context=parent, kind=self._kind, attributes=self._attributes)
        self._token = otel_context.attach(trace.set_span_in_context(self._span, parent))
        return self._span

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        span = self._span
        if span is INVALID_SPAN:
            return
        try:
            if error is not None:
                fail(span, "cancelled" if isinstance(error, trio.Cancelled) else type(error).__name__, str(error))
            span.end()
        finally:
            if self._token is not None:
                otel_context.detach(self._token)


def open_span(
    name: str,
    attributes: Attributes | Callable[[], Attributes] | None = None,
    *,
    target: str | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    parent: Context | None = None,
) -> SpanBlock | NoSpan:
    """``with open_span(name, attributes) as span:`` — a span, current for the block.

    The span is named ``name``, followed by `` target`` when ``target`` is given (``open_span("chat",
    target=model)``); ``attributes`` may be a function that makes them. ``parent`` is a carried context
    (:func:`capture`) to start under instead of the current one. An exception leaving the block marks the span
    failed with ``error.type`` (``cancelled`` for a Trio cancellation) unless the block already set one.

    While tracing is off it is the shared :data:`NO_SPAN` (``span`` is the API's invalid span, on which every
    method does nothing), and neither the name nor the attributes are made: callers need not check first.
    """
    if not tracing_on():
        return NO_SPAN
    if target is not None:
        name = f"{name} {target}"
    if callable(attributes):
        attributes = attributes()
    return SpanBlock(name, attributes, kind, parent)


def fail(span: Span, error_type: str, description: str = "") -> None:
    """Mark ``span`` failed with ``error.type`` (the first one given counts)."""
    if not span.is_recording():
        return
    attributes = getattr(span, "attributes", None) or {}
    if ERROR_TYPE not in attributes:
        span.set_attribute(ERROR_TYPE, error_type)
    span.set_status(StatusCode.ERROR, description or error_type)


def current_span() -> Span:
    """The span current in this task (the invalid span while tracing is off)."""
    return trace.get_current_span() if tracing_on() else INVALID_SPAN


def add_event(name: str, attributes: Attributes | None = None) -> None:
    """Add an event (a retry, a restart seen by a call, the fallback) to the current span."""
    span = current_span()
    if span.is_recording():
        span.add_event(name, attributes)
