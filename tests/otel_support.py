"""An OpenTelemetry SDK tracer provider for tests, recording into memory only while a test asks for spans.

A process has one global tracer provider, set once; this one is installed the first time a test uses the
``spans`` fixture, and samples nothing outside that fixture, so the rest of the suite records nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind
from opentelemetry.trace.span import TraceState
from opentelemetry.util.types import Attributes


class _Switch(Sampler):
    """Samples everything while ``on``, nothing otherwise."""

    on = False

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: TraceState | None = None,
    ) -> SamplingResult:
        chosen = ALWAYS_ON if self.on else ALWAYS_OFF
        return chosen.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)

    def get_description(self) -> str:
        return "test switch"


_SWITCH = _Switch()
_EXPORTER = InMemorySpanExporter()


def _install() -> None:
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider(sampler=_SWITCH)
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The spans finished during the test (``spans.get_finished_spans()``)."""
    _install()
    _EXPORTER.clear()
    _SWITCH.on = True
    try:
        yield _EXPORTER
    finally:
        _SWITCH.on = False
        _EXPORTER.clear()


def named(finished: Sequence[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [span for span in finished if span.name == name]


def one(finished: Sequence[ReadableSpan], name: str) -> ReadableSpan:
    found = named(finished, name)
    assert len(found) == 1, (name, [span.name for span in finished])
    return found[0]


def parent_of(span: ReadableSpan, finished: Sequence[ReadableSpan]) -> ReadableSpan | None:
    """The finished span that is ``span``'s parent (``None`` for a root)."""
    if span.parent is None:
        return None
    return next(s for s in finished if s.context is not None and s.context.span_id == span.parent.span_id)


def nested(finished: Sequence[ReadableSpan], outer: str, inner: str) -> tuple[ReadableSpan, ReadableSpan]:
    """The one span named ``outer`` and the one named ``inner``, checked to be its child."""
    parent, child = one(finished, outer), one(finished, inner)
    assert parent_of(child, finished) is parent, (outer, inner)
    return parent, child


def is_descendant(span: ReadableSpan, ancestor: ReadableSpan, finished: Sequence[ReadableSpan]) -> bool:
    current: ReadableSpan | None = span
    while current is not None:
        current = parent_of(current, finished)
        if current is ancestor:
            return True
    return False


__all__ = ["is_descendant", "named", "nested", "one", "parent_of", "spans"]
