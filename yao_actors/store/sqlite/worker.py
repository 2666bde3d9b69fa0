"""A thread of a store's own for its blocking calls: the SQLite store's one writer, off the event loop.

``trio.to_thread.run_sync`` borrows a thread from Trio's cache for each call and
goes through a capacity limiter and context copies; a store that writes every
turn of every run pays that each time (about 0.2 ms of CPU per call on a 2-core
machine, as much as the SQLite transaction itself). A :class:`WorkerThread` is one
thread that lives as long as the store: a call is one queue put to it and one
``TrioToken.run_sync_soon`` back, about half the CPU. Calls run one at a time, in
the order they were made.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import attrs
import outcome
import trio

T = TypeVar("T")

Batch = Callable[[Sequence[Callable[[], Any]]], list[outcome.Outcome[Any]]]
"""Runs several jobs together (the SQLite store: in one transaction) and gives each its own outcome, in order."""

MAX_BATCH = 64
"""Jobs at most that one :data:`Batch` runs together."""

_Job = tuple[Callable[[], Any], trio.lowlevel.Task, Batch | None]


def _serve(jobs: queue.SimpleQueue[_Job | None], token: trio.lowlevel.TrioToken) -> None:
    """The thread: run each job and hand its outcome back to the task waiting for it, until ``None``.

    Jobs that came with a :data:`Batch` and found others of the same batch waiting behind them run together
    (the calls made while the thread was busy): one transaction for what many runs wrote meanwhile.
    """
    held: list[_Job | None] = []  # a job taken from the queue that did not belong to the last batch
    while (job := held.pop() if held else jobs.get()) is not None:
        batch, runner = [job], job[2]
        while runner is not None and len(batch) < MAX_BATCH:
            try:
                more = jobs.get_nowait()
            except queue.Empty:
                break
            if more is None or more[2] is not runner:
                held.append(more)  # the end, or a job of another kind: after this batch
                break
            batch.append(more)
        results = (
            _run_batch(runner, [work for work, _, _ in batch]) if runner is not None else [outcome.capture(job[0])]
        )
        try:
            for (_, task, _), result in zip(batch, results, strict=True):
                token.run_sync_soon(trio.lowlevel.reschedule, task, result)
        except trio.RunFinishedError:  # nobody is left to hand it to
            return


def _run_batch(runner: Batch, works: list[Callable[[], Any]]) -> list[outcome.Outcome[Any]]:
    """``runner``'s outcomes for ``works``; should the runner itself raise (a bug: it gives each work its own
    outcome), each work's caller gets that error, as :func:`outcome.capture` gives a lone job's, and the thread
    goes on: a caller waiting for the thread cannot be cancelled, and must never wait for a thread that died."""
    try:
        return runner(works)
    except Exception as error:  # the thread's boundary: whatever it is, it goes to the callers
        return [outcome.Error(error) for _ in works]


@attrs.define(eq=False)
class WorkerThread:
    """Runs blocking calls in its thread (open with :func:`open_worker_thread`)."""

    _jobs: queue.SimpleQueue[_Job | None]

    async def run(self, work: Callable[[], T], *, batch: Batch | None = None) -> T:
        """Run ``work`` in the thread; its result, or its exception raised here. With ``batch``, ``work`` may
        run together with other calls of the same ``batch`` made while the thread was busy.

        A checkpoint before the hand-over; after it, the call is not cancellable (as
        ``trio.to_thread.run_sync`` by default): work that started finishes before a
        cancellation is delivered, so a transaction is never left in doubt.
        """
        await trio.lowlevel.checkpoint_if_cancelled()
        self._jobs.put((work, trio.lowlevel.current_task(), batch))
        result: T = await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)
        return result


@asynccontextmanager
async def open_worker_thread(name: str) -> AsyncIterator[WorkerThread]:
    """Start a thread named ``name`` for blocking calls; on exit, wait for it to finish its last one and end."""
    jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
    thread = threading.Thread(target=_serve, args=(jobs, trio.lowlevel.current_trio_token()), name=name, daemon=True)
    thread.start()
    try:
        yield WorkerThread(jobs)
    finally:
        jobs.put(None)
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(thread.join)
