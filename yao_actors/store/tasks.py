"""How every backend keeps a run's open task (:class:`~yao_actors.store.protocol.TaskRecords`): the handle as the
JSON text of its record (:meth:`~yao_actors.tools.task_handle.TaskHandle.to_record`), the same in each backend,
and handles listed oldest first."""

from __future__ import annotations

import json
from collections.abc import Iterable

from yao_actors.tools.task_handle import TaskHandle


def encode_handle(handle: TaskHandle) -> str:
    """The handle as the JSON text a store keeps."""
    return json.dumps(handle.to_record(), separators=(",", ":"), ensure_ascii=False)


def decode_handle(text: str | bytes) -> TaskHandle:
    """The handle :func:`encode_handle` made ``text`` of."""
    return TaskHandle.from_record(json.loads(text))


def oldest_first(handles: Iterable[TaskHandle]) -> list[TaskHandle]:
    """``handles`` in the order their tasks were created (then by task id)."""
    return sorted(handles, key=lambda handle: (handle.created_at, handle.task_id))
