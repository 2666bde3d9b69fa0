"""Report a model call's retry where operators look: a log record, and an event on the call's ``chat`` span."""

from __future__ import annotations

import logging

from yao_actors.observability import tracing

logger = logging.getLogger(__name__)


def report_model_retry(model: str, retry: int, delay: float, error: Exception) -> None:
    """Retry number ``retry`` of a call to ``model`` comes in ``delay`` seconds, after ``error``."""
    logger.warning("model %s: %s; retry %d in %.2fs", model, error, retry, delay, extra={"model": model})
    tracing.add_event(
        "yao.model.retry", {"yao.retry.number": retry, "yao.retry.delay": delay, "error.type": type(error).__name__}
    )
