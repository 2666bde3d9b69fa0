"""The in-memory store: the library's default, gone with the process."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import trio

from yao_actors.store.base import (
    ANY_PRINCIPAL,
    DEFAULT_EVENT_TTL,
    AnyPrincipal,
    EventDict,
    Message,
    RunRecord,
    RunStatus,
    ThreadInfo,
    check_rises,
    decode_json,
    encode_event,
    encode_message,
    event_seqs,
    new_owner_token,
    purge_interval,
    utc,
)


@attrs.define
class _EventLog:
    expires_at: float
    events: list[EventDict] = attrs.field(factory=list)


@attrs.define(eq=False)
class MemoryStore:
    """A :class:`~yao_actors.store.ConversationStore` in dicts.

    Values are copied in and out (through JSON), so a caller never shares a
    stored message or event. ``clock`` gives POSIX time (tests move it).
    """

    event_ttl: float = DEFAULT_EVENT_TTL
    clock: Callable[[], float] = time.time
    owner: str = attrs.field(factory=new_owner_token)
    _threads: dict[str, ThreadInfo] = attrs.field(factory=dict, init=False)
    _messages: dict[str, list[str]] = attrs.field(factory=dict, init=False)
    _runs: dict[str, RunRecord] = attrs.field(factory=dict, init=False)
    _thread_runs: dict[str, list[str]] = attrs.field(factory=dict, init=False)
    _logs: dict[str, _EventLog] = attrs.field(factory=dict, init=False)
    _next_purge: float = attrs.field(default=0.0, init=False)

    # -- threads

    async def open_thread(self, thread_id: str, principal: str | None) -> ThreadInfo:
        await trio.lowlevel.checkpoint()
        if thread_id not in self._threads:
            now = utc(self.clock())
            self._threads[thread_id] = ThreadInfo(thread_id, principal, now, now)
            self._messages[thread_id] = []
            self._thread_runs[thread_id] = []
        return self._threads[thread_id]

    async def get_thread(self, thread_id: str) -> ThreadInfo | None:
        await trio.lowlevel.checkpoint()
        return self._threads.get(thread_id)

    async def list_threads(
        self, principal: str | AnyPrincipal | None = ANY_PRINCIPAL, *, limit: int = 100
    ) -> list[ThreadInfo]:
        await trio.lowlevel.checkpoint()
        threads = [t for t in self._threads.values() if principal is ANY_PRINCIPAL or t.principal == principal]
        # Insertion order breaks ties between threads created within one clock tick.
        return list(reversed(threads))[:limit]

    async def load_history(self, thread_id: str) -> list[Message]:
        await trio.lowlevel.checkpoint()
        return [decode_json(text) for text in self._messages.get(thread_id, ())]

    async def append_messages(self, thread_id: str, messages: Sequence[Message]) -> None:
        await trio.lowlevel.checkpoint()
        self._append(thread_id, [encode_message(m) for m in messages])

    def _append(self, thread_id: str, encoded: list[str]) -> None:
        if thread_id not in self._threads:
            raise KeyError(f"thread {thread_id!r} was not opened")
        self._messages[thread_id].extend(encoded)
        self._threads[thread_id] = attrs.evolve(self._threads[thread_id], updated_at=utc(self.clock()))

    async def forget_thread(self, thread_id: str) -> bool:
        await trio.lowlevel.checkpoint()
        if self._threads.pop(thread_id, None) is None:
            return False
        del self._messages[thread_id]
        for run_id in self._thread_runs.pop(thread_id):
            del self._runs[run_id]
            self._logs.pop(run_id, None)
        return True

    # -- runs

    async def start_run(
        self, thread_id: str, run_id: str, assistant: str, input_messages: Sequence[Message]
    ) -> RunRecord:
        await trio.lowlevel.checkpoint()
        encoded = [encode_message(m) for m in input_messages]
        if run_id in self._runs:
            raise ValueError(f"run {run_id!r} is already stored")
        self._append(thread_id, encoded)
        run = RunRecord(run_id, thread_id, assistant, RunStatus.RUNNING, utc(self.clock()), self.owner)
        self._runs[run_id] = run
        self._thread_runs[thread_id].append(run_id)
        return run

    async def finish_run(
        self, run_id: str, *, status: RunStatus, outcome: str, usage: Mapping[str, Any] | None = None
    ) -> bool:
        await trio.lowlevel.checkpoint()
        run = self._runs.get(run_id)
        if run is None or run.status is not RunStatus.RUNNING:
            return False
        self._runs[run_id] = attrs.evolve(
            run, status=status, outcome=outcome, usage=dict(usage or {}), finished_at=utc(self.clock())
        )
        return True

    async def get_run(self, run_id: str) -> RunRecord | None:
        await trio.lowlevel.checkpoint()
        return self._runs.get(run_id)

    async def list_runs(self, thread_id: str) -> list[RunRecord]:
        await trio.lowlevel.checkpoint()
        return [self._runs[run_id] for run_id in self._thread_runs.get(thread_id, ())]

    # -- event logs

    async def append_events(self, run_id: str, events: Sequence[EventDict]) -> None:
        await trio.lowlevel.checkpoint()
        seqs = event_seqs(events)
        if run_id not in self._runs:
            raise KeyError(f"run {run_id!r} is not stored")
        copies = [decode_json(encode_event(e)) for e in events]
        log = self._live_log(run_id)
        check_rises(run_id, seqs, log.events[-1]["seq"] if log and log.events else 0)
        if log is None:
            log = self._logs[run_id] = _EventLog(0.0)
        log.events.extend(copies)
        log.expires_at = self.clock() + self.event_ttl
        self._purge_expired_logs()

    async def read_events(self, run_id: str, after_seq: int = 0) -> list[EventDict]:
        await trio.lowlevel.checkpoint()
        log = self._live_log(run_id)
        return [dict(e) for e in log.events if e["seq"] > after_seq] if log else []

    def _live_log(self, run_id: str) -> _EventLog | None:
        """The run's log, dropping it when it has expired."""
        log = self._logs.get(run_id)
        if log is not None and log.expires_at <= self.clock():
            del self._logs[run_id]
            return None
        return log

    def _purge_expired_logs(self) -> None:
        """Drop every expired log, at most once per ``purge_interval(event_ttl)``, so unread logs do not pile up."""
        now = self.clock()
        if now < self._next_purge:
            return
        self._next_purge = now + purge_interval(self.event_ttl)
        for run_id in [r for r, log in self._logs.items() if log.expires_at <= now]:
            del self._logs[run_id]

    async def close_interrupted_runs(self) -> list[str]:
        """Nothing outlives the process that holds a memory store: there is never a run to close."""
        await trio.lowlevel.checkpoint()
        return []
