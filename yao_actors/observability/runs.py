"""What a run and its model calls tell operators: their spans, metrics and log records, in one place.

:class:`RunObservation` is the ``invoke_agent`` span, ``yao_active_runs``, ``yao_runs_total``,
``yao_run_duration_seconds`` and the "run started" / "run ended" records of one run;
:class:`ModelCallObservation` the ``chat`` span, ``yao_model_calls_total`` and ``yao_model_tokens_total`` of
one model call. The conversation actor and the run open them; nothing here changes what a run does.
"""

from __future__ import annotations

import logging
from types import TracebackType
from typing import Protocol

import trio
from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN, Span, SpanKind

from yao_actors.errors import ModelHTTPError, ModelStreamError, ModelTimeout
from yao_actors.observability import tracing
from yao_actors.observability.logs import run_fields
from yao_actors.observability.metrics import (
    ACTIVE_RUNS,
    MODEL_CALLS,
    MODEL_TOKENS,
    RUN_DURATION,
    RUNS,
    labelled,
)

logger = logging.getLogger(__name__)


class TokenCounts(Protocol):
    """What this module reads of a usage (:class:`yao_actors.models.Usage`): it says what it needs rather than
    import the models, which stand above it."""

    @property
    def prompt_tokens(self) -> int: ...

    @property
    def completion_tokens(self) -> int: ...


class ModelAnswer(Protocol):
    """What this module reads of a model's answer (:class:`yao_actors.models.Completion`)."""

    @property
    def usage(self) -> TokenCounts | None: ...

    @property
    def finish_reason(self) -> str | None: ...


class RunObservation:
    """``with RunObservation(...) as observed:`` around a run; :meth:`ended` once its result is known."""

    def __init__(self, assistant: str, run_id: str, thread_id: str, parent: Context | None) -> None:
        self.assistant = assistant
        self.run_id = run_id
        self.thread_id = thread_id
        self._fields = run_fields(run_id, thread_id)
        self._span = tracing.open_span(
            "invoke_agent",
            lambda: {
                tracing.OPERATION: "invoke_agent",
                tracing.AGENT_NAME: assistant,
                tracing.CONVERSATION_ID: thread_id,
                tracing.RUN_ID: run_id,
            },
            target=assistant,
            parent=parent,
        )
        self.span: Span = INVALID_SPAN
        self._started = 0.0
        self._ended = False

    def __enter__(self) -> RunObservation:
        self._fields.__enter__()
        self.span = self._span.__enter__()
        self._started = trio.current_time()
        ACTIVE_RUNS.inc()
        logger.info("run started", extra={**self._ids(), "assistant": self.assistant})
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if not self._ended:
            ACTIVE_RUNS.dec()
        if self._ended and error is not None and _only_cancelled(error):
            # The run's result was already handed over: a cancellation that reaches its tail (the runtime
            # closing while the actor tidies up) is not the run failing.
            kind = error = traceback = None
        try:
            self._span.__exit__(kind, error, traceback)
        finally:
            self._fields.__exit__(kind, error, traceback)

    def ended(self, outcome: str, usage: TokenCounts, *, code: str | None = None, error: str | None = None) -> None:
        """The run's result is known: count it, log it, and close its span's attributes."""
        self._ended = True
        ACTIVE_RUNS.dec()
        duration = trio.current_time() - self._started
        labelled(RUNS, self.assistant, outcome).inc()
        RUN_DURATION.observe(duration)
        self.span.set_attribute(tracing.RUN_OUTCOME, outcome)
        self.span.set_attribute(tracing.INPUT_TOKENS, usage.prompt_tokens)
        self.span.set_attribute(tracing.OUTPUT_TOKENS, usage.completion_tokens)
        if code is not None or outcome == "cancelled":
            tracing.fail(self.span, code or outcome, error or "")
        fields = {
            **self._ids(),
            "assistant": self.assistant,
            "outcome": outcome,
            "duration": round(duration, 6),
            "input_tokens": usage.prompt_tokens,
            "output_tokens": usage.completion_tokens,
        }
        if code is not None:
            fields["code"] = code
        level = logging.WARNING if code is not None else logging.INFO
        logger.log(level, "run ended: %s", code or outcome, extra=fields)

    def event(self, name: str, attributes: dict[str, str | int] | None = None) -> None:
        """An event on the run's span (a tool retry, the fallback)."""
        if self.span.is_recording():
            self.span.add_event(name, attributes)

    def _ids(self) -> dict[str, str]:
        return {"run_id": self.run_id, "thread_id": self.thread_id}


def _only_cancelled(error: BaseException) -> bool:
    if isinstance(error, BaseExceptionGroup):
        return all(_only_cancelled(inner) for inner in error.exceptions)
    return isinstance(error, trio.Cancelled)


class ModelCallObservation:
    """``with ModelCallObservation(model, step) as observed:`` around one model call; :meth:`completed` after."""

    def __init__(self, model: str, step: str) -> None:
        self.model = model
        self._span = tracing.open_span(
            "chat",
            lambda: {tracing.OPERATION: "chat", tracing.REQUEST_MODEL: model, tracing.STEP: step},
            target=model,
            kind=SpanKind.CLIENT,
        )
        self.span: Span = INVALID_SPAN

    def __enter__(self) -> ModelCallObservation:
        self.span = self._span.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if error is not None:
            error_type = model_error_type(error)
            outcome = error_type if error_type in ("timeout", "cancelled") else "error"
            labelled(MODEL_CALLS, self.model, outcome).inc()
            tracing.fail(self.span, error_type, str(error))
        self._span.__exit__(kind, error, traceback)

    def completed(self, completion: ModelAnswer) -> None:
        """The call answered: count it and its tokens."""
        labelled(MODEL_CALLS, self.model, "ok").inc()
        usage = completion.usage
        if usage is not None:
            labelled(MODEL_TOKENS, self.model, "input").inc(usage.prompt_tokens)
            labelled(MODEL_TOKENS, self.model, "output").inc(usage.completion_tokens)
        span = self.span
        if span.is_recording():
            attributes: dict[str, int | tuple[str, ...]] = {}
            if usage is not None:
                attributes[tracing.INPUT_TOKENS] = usage.prompt_tokens
                attributes[tracing.OUTPUT_TOKENS] = usage.completion_tokens
            if completion.finish_reason:
                attributes[tracing.FINISH_REASONS] = (completion.finish_reason,)
            span.set_attributes(attributes)


def model_error_type(error: BaseException) -> str:
    """The ``error.type`` of a failed model call: ``timeout``, ``http_<status>``, ``stream_error``, ``cancelled``,
    or the exception's class name."""
    if isinstance(error, ModelTimeout | trio.TooSlowError):
        return "timeout"
    if isinstance(error, ModelHTTPError):
        return f"http_{error.status}"
    if isinstance(error, ModelStreamError):
        return "stream_error"
    if isinstance(error, trio.Cancelled):
        return "cancelled"
    return type(error).__name__
