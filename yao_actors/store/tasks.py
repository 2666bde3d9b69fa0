"""How every backend keeps a run's open task (:class:`~yao_actors.store.protocol.TaskRecords`): the handle as the
JSON text of its record (:meth:`~yao_actors.store.task_handle.TaskHandle.to_record`), the same in each backend,
and handles listed oldest first. A record that does not read back as a handle raises
:class:`~yao_actors.errors.CorruptTaskRecord` naming it by thread and task."""

from __future__ import annotations

import json
from collections.abc import Iterable

from yao_actors.errors import CorruptTaskRecord
from yao_actors.store.task_handle import TaskHandle


def encode_handle(handle: TaskHandle) -> str:
    """The handle as the JSON text a store keeps."""
    return json.dumps(handle.to_record(), separators=(",", ":"), ensure_ascii=False)


def decode_handle(text: str | bytes, *, thread_id: str | None = None, task_id: str | None = None) -> TaskHandle:
    """The handle :func:`encode_handle` made ``text`` of; ``thread_id`` and ``task_id`` say where the store keeps
    it (what :class:`~yao_actors.errors.CorruptTaskRecord` names when it does not read back; by default, what
    the record itself says, if anything)."""
    try:
        record = json.loads(text)
    except (ValueError, RecursionError) as error:  # not JSON, not UTF-8, or nested past the parser
        raise CorruptTaskRecord(thread_id or "?", task_id or "?", f"not JSON ({error})") from error
    try:
        return TaskHandle.from_record(record)
    except ValueError as error:
        said = record if isinstance(record, dict) else {}
        thread = thread_id or _said(said, "thread_id")
        raise CorruptTaskRecord(thread, task_id or _said(said, "task_id"), str(error)) from error


def _said(record: dict[str, object], name: str) -> str:
    """What a record that does not read back says its ``name`` is, if it says (``?`` otherwise)."""
    value = record.get(name)
    return value if isinstance(value, str) else "?"


def oldest_first(handles: Iterable[TaskHandle]) -> list[TaskHandle]:
    """``handles`` in the order their tasks were created (then by task id)."""
    return sorted(handles, key=lambda handle: (handle.created_at, handle.task_id))
