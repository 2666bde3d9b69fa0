"""A tool call a server answered with a task: the handle a run keeps, and stores, until the task ends.

A server may answer ``tools/call`` with a task instead of a result: the call goes on in the server, and the
client asks for it by the task's id until it ends. Two wire designs exist, not compatible with each other
(:class:`TaskDesign`): the 2026-07-28 tasks extension (``io.modelcontextprotocol/tasks``: ``resultType: "task"``,
``tasks/get`` carries the result, ``tasks/update`` answers input, ``Mcp-Name`` on HTTP) and the 2025-11-25 tasks
(``CreateTaskResult``, ``tasks/get`` for the status, ``tasks/result`` for the result and the server's questions).

A :class:`TaskHandle` is everything needed to go on polling a task from another process: it is stored with the
thread when the task is created, before the run goes on, and removed when the task's result has reached the
model. It holds no secret (whose connection made the task is a principal's id, never a token).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from typing import Any, Final

import attrs


class TaskDesign(enum.StrEnum):
    """Which wire design a task speaks."""

    EXTENSION = "2026-07-28"  #: the ``io.modelcontextprotocol/tasks`` extension
    HANDSHAKE_ERA = "2025-11-25"  #: the 2025-11-25 ``tasks/*`` requests


@attrs.frozen
class TaskHandle:
    """One open task of one tool call of a run.

    ``server`` is the server's id in the config, ``task_id`` the server's id of the task, ``call_id`` the
    model's tool call it answers (with the ``tool`` and ``arguments`` the call was made with), ``run_id`` and
    ``thread_id`` where its result goes. ``poll_interval`` is the seconds the server asked between polls (``None``:
    the client's default), ``principal`` whose connection made the task (``None``: the service's own),
    ``session_id`` the MCP session a server bound the task to (streamable HTTP; ``None`` when not bound),
    ``created_at`` a wall-clock time (``time.time()``) and ``deadline`` the wall-clock time past which the run stops
    waiting (the assistant's ``task_timeout`` from ``created_at``).
    """

    server: str
    task_id: str
    design: TaskDesign
    call_id: str
    tool: str
    arguments: Mapping[str, Any]
    run_id: str
    thread_id: str
    created_at: float
    deadline: float
    poll_interval: float | None = None
    principal: str | None = None
    session_id: str | None = None

    def wait_until(self, timeout: float) -> float:
        """The wall-clock time past which a run stops waiting for the task: its ``deadline``, but never later than
        ``timeout`` seconds (the assistant's ``task_timeout``) after its creation — a stored deadline is not
        trusted further (an infinite, far or NaN one is that bound)."""
        limit = self.created_at + timeout
        return self.deadline if self.deadline <= limit else limit

    def to_record(self) -> dict[str, Any]:
        """The handle as a JSON-ready mapping (what a store keeps)."""
        record = attrs.asdict(self, recurse=False)
        record["design"] = self.design.value
        record["arguments"] = dict(self.arguments)
        return record

    @classmethod
    def from_record(cls, record: object) -> TaskHandle:
        """The handle a store kept (:meth:`to_record`). A store's text is read as untrusted: a record that is not
        a mapping, or whose field is missing, of the wrong type, not a design, or not a finite number raises
        ``ValueError`` naming the field (unknown fields are ignored)."""
        if not isinstance(record, Mapping):
            raise ValueError(f"a task record is a JSON object, not {type(record).__name__}")
        values: dict[str, Any] = {name: _text(record, name) for name in _TEXTS}
        values.update({name: _number(record, name) for name in ("created_at", "deadline")})
        design = record.get("design")
        if design not in {each.value for each in TaskDesign}:
            raise ValueError(f"field 'design' is not a task design: {design!r}")
        arguments = record.get("arguments")
        if not isinstance(arguments, Mapping):
            raise ValueError(f"field 'arguments' is not a JSON object: {type(arguments).__name__}")
        interval = record.get("poll_interval")
        return cls(
            **values,
            design=TaskDesign(design),
            arguments=arguments,
            poll_interval=None if interval is None else _number(record, "poll_interval"),
            principal=_text(record, "principal", optional=True),
            session_id=_text(record, "session_id", optional=True),
        )


#: The fields of a task record that are text.
_TEXTS: Final = ("server", "task_id", "call_id", "tool", "run_id", "thread_id")


def _text(record: Mapping[str, Any], name: str, *, optional: bool = False) -> Any:
    """Field ``name`` of a stored record, checked to be text (or, when ``optional``, absent or ``null``)."""
    value = record.get(name)
    if isinstance(value, str) or (optional and value is None):
        return value
    raise ValueError(f"field {name!r} is not text: {value!r:.80}")


def _number(record: Mapping[str, Any], name: str) -> float:
    """Field ``name`` of a stored record, checked to be a finite number."""
    value = record.get(name)
    number = math.nan
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value) if isinstance(value, float) or abs(value) < 2**1000 else math.inf
    if not math.isfinite(number):
        raise ValueError(f"field {name!r} is not a finite number: {value!r:.80}")
    return number
