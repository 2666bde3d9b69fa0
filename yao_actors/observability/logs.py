"""Logging: every record about a run carries its ids, and the service logs as text or as JSON lines.

Modules log with the standard :mod:`logging`, one logger per module. A run's actor makes its ids current
(:func:`run_fields`), and :class:`RunContextFilter` copies them onto every record logged meanwhile in that task —
by the run itself, its model calls, its dispatch — so each record about a run has ``run_id`` and ``thread_id``.
Records about a server carry ``server`` (given as ``extra``). :func:`configure_logging` is what
``yao-actors serve --log-level LEVEL --log-format text|json`` calls: ``json`` writes one object per line (time,
level, logger, message, the ids and every other ``extra`` field, the traceback as text), ready for Loki or Elastic.
An embedding application configures logging its own way and may add :class:`RunContextFilter` to its handlers.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Final, Literal, TextIO

LogFormat = Literal["text", "json"]
LOG_FORMATS: Final = ("text", "json")

_run: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar("yao_actors_run", default=None)

#: Attributes every ``LogRecord`` has; anything else on a record came as ``extra``.
_STANDARD: Final = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}
#: Libraries that log every HTTP request at INFO: kept at WARNING unless the level asked for is DEBUG.
_CHATTY: Final = ("httpx", "httpx2", "httpcore", "mcp", "uvicorn")
#: Finds what makes a text value need quotes: any whitespace.
_SPACE: Final = re.compile(r"\s")


@contextmanager
def run_fields(run_id: str, thread_id: str) -> Iterator[None]:
    """Make a run's ids current in this task (and the tasks it starts) for the block."""
    token = _run.set({"run_id": run_id, "thread_id": thread_id})
    try:
        yield
    finally:
        _run.reset(token)


class RunContextFilter(logging.Filter):
    """Copy the current run's ids onto a record that does not carry them already."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields = _run.get()
        if fields:
            for key, value in fields.items():
                if not hasattr(record, key):
                    setattr(record, key, value)
        return True


def record_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The ``extra`` fields of a record (the run ids among them), in the order they were set."""
    return {key: value for key, value in record.__dict__.items() if key not in _STANDARD and not key.startswith("_")}


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in record_fields(record).items():
            entry.setdefault(key, value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message key=value ...`` (the record's ``extra`` fields after the message)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = record_fields(record)
        if not fields:
            return text
        head, newline, rest = text.partition("\n")  # a traceback stays below the first line
        pairs = " ".join(f"{key}={_text_value(value)}" for key, value in fields.items())
        return f"{head} {pairs}{newline}{rest}"


def _text_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return json.dumps(text, ensure_ascii=False) if (not text or _SPACE.search(text)) else text


def configure_logging(level: str = "INFO", fmt: LogFormat = "text", *, stream: TextIO | None = None) -> None:
    """Send every log record at ``level`` and above to ``stream`` (standard error) as text or JSON lines.

    Replaces the root logger's handlers. Libraries that log each HTTP request stay at WARNING unless ``level`` is
    ``DEBUG``. Raises ``ValueError`` for an unknown level or format.
    """
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r} (DEBUG, INFO, WARNING, ERROR or CRITICAL)")
    if fmt not in LOG_FORMATS:
        raise ValueError(f"unknown log format {fmt!r} (text or json)")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(RunContextFilter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    for name in _CHATTY:
        logging.getLogger(name).setLevel(numeric if numeric <= logging.DEBUG else max(numeric, logging.WARNING))
