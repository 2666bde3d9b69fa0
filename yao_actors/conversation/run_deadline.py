"""A run's deadline (``timeouts.run``) that stands still while the run waits on a task.

A tool call a server answers with a task may take far longer than a run's own work: the task is bounded by the
assistant's ``task_timeout`` (and by cancelling the run), not by ``timeouts.run``. So the run's deadline scope
counts only the time the run spends on everything else: while at least one of its calls waits on a task
(:meth:`RunDeadline.waiting`, entered by the wait, :mod:`~yao_actors.tools.task_flow`), the scope's deadline is
lifted; when the last such wait ends it comes back with the seconds it had left when the first began. The
run's control is told of each wait too (``on_wait``): a detached run's ``detach_grace`` does not run meanwhile.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import attrs
import trio


@attrs.define(eq=False)
class RunDeadline:
    """The cancel scope bounding a run (``timeouts.run`` seconds from its start), paused while tasks are waited on."""

    scope: trio.CancelScope
    on_wait: Callable[[int], None] = lambda change: None
    """Told ``+1`` when a call begins waiting on a task, ``-1`` when it stops (the run's control: a detached run's
    grace stands still meanwhile too)."""
    waits: int = 0
    """How many of the run's calls wait on a task now."""
    left: float = math.inf
    """The seconds the deadline had left when the first of the current waits began."""

    @classmethod
    def after(cls, seconds: float, on_wait: Callable[[int], None] = lambda change: None) -> RunDeadline:
        """A deadline ``seconds`` from now (enter its :attr:`scope` to apply it)."""
        return cls(trio.CancelScope(deadline=trio.current_time() + seconds), on_wait)

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Within this block (a call waiting on its task) the run's deadline does not run."""
        if self.waits == 0:
            self.left = self.scope.deadline - trio.current_time()
            self.scope.deadline = math.inf
        self.waits += 1
        self.on_wait(1)
        try:
            yield
        finally:
            self.on_wait(-1)
            self.waits -= 1
            if self.waits == 0:
                self.scope.deadline = trio.current_time() + self.left
