"""What a call needs to keep a task a server answers it with (:class:`TaskWatch`); the handle it keeps is the
store's (:class:`~yao_actors.store.task_handle.TaskHandle`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext

import attrs

from yao_actors.store.task_handle import TaskHandle


@attrs.frozen
class TaskWatch:
    """What a call needs to know to keep a task it is answered with: which call of which run it is, how long the
    run waits for the task (``timeout``, seconds), and ``stored``, awaited with the task's handle once the server
    has created it and before the call goes on waiting (the run stores the handle there). ``waiting`` is entered
    around the wait for the task: the run's own deadline stands still meanwhile (the task is bounded by
    ``timeout`` and by cancelling the run, not by the run's or the turn's deadlines)."""

    call_id: str
    run_id: str
    thread_id: str
    timeout: float
    stored: Callable[[TaskHandle], Awaitable[None]]
    waiting: Callable[[], AbstractContextManager[None]] = nullcontext
