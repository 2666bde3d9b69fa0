"""The errors a store refuses a write with, worded alike by every backend (the write refused wrote nothing)."""

from __future__ import annotations

from yao_actors.errors import RunClosed, RunIdTaken, UnknownRun, UnknownThread


def thread_not_opened(thread_id: str) -> UnknownThread:
    return UnknownThread(f"thread {thread_id!r} was not opened")


def run_id_taken(run_id: str) -> RunIdTaken:
    return RunIdTaken(f"run {run_id!r} is already stored")


def unknown_run(run_id: str, thread_id: str | None = None) -> UnknownRun:
    """The run is not stored (on ``thread_id``, when given)."""
    on = "" if thread_id is None else f" on thread {thread_id!r}"
    return UnknownRun(f"run {run_id!r} is not stored{on}")


def run_closed(run_id: str, status: str) -> RunClosed:
    """The run is no longer running: another process closed it (``status``, how)."""
    return RunClosed(f"run {run_id!r} is closed already ({status})")
