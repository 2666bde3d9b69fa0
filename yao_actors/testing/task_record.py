"""The record file of a task test server: one JSON line for each task body that starts, ends, or is cancelled.

A line is ``{"event": "ran" | "completed" | "failed" | "cancelled", "tool", "task"}``. The file outlives any client
(and the server), so a test reads there how often a task ran (:func:`read_task_record`); the server keeps the
counts in memory too, for its ``task_stats`` tool.
"""

from __future__ import annotations

import collections
import json
import pathlib
from typing import Any

#: The environment variable naming the record file (the server's ``--record`` wins).
RECORD_ENV = "YAO_TASK_SERVER_RECORD"


class TaskRecord:
    """The append-only record file of task bodies (nothing when ``path`` is ``None``), and the counts."""

    def __init__(self, path: pathlib.Path | None) -> None:
        self.path = path
        self.ran: collections.Counter[str] = collections.Counter()
        self.cancelled: collections.Counter[str] = collections.Counter()

    def write(self, event: str, tool: str, task_id: str) -> None:
        """Count ``event`` of ``tool``'s task ``task_id``, and append its line to the file."""
        if event == "ran":
            self.ran[tool] += 1
        elif event == "cancelled":
            self.cancelled[tool] += 1
        if self.path is not None:
            line = json.dumps({"event": event, "tool": tool, "task": task_id}) + "\n"
            with self.path.open("a", encoding="utf-8") as file:
                file.write(line)
                file.flush()


def read_task_record(path: pathlib.Path) -> list[dict[str, Any]]:
    """The lines a task server wrote to its record file (none if it wrote nothing yet)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
