"""The runs' event logs in memory: each run's events as the text they went on the wire as, within two budgets.

A thread's logs together hold at most ``max_thread_bytes``, all logs at most ``max_threads_bytes`` (a text's
length, and :data:`~yao_actors.history_budget.VALUE_OVERHEAD` per event); over either, the logs of the oldest
finished runs are dropped first (as if expired), never the log of a run in progress. A log expires
``event_ttl`` seconds after its last event; expired logs are dropped when read, and all at once at most every
:func:`~yao_actors.store.codec.purge_interval`.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence

import attrs

import yao_actors.store.codec as codec
import yao_actors.store.records as records
from yao_actors.history_budget import VALUE_OVERHEAD

#: A batch of events checked for a log: their ``seq`` numbers and their texts.
Batch = tuple[list[int], list[str]]


@attrs.define
class EventLog:
    """A run's stored events: their ``seq`` numbers and their JSON texts, in order, and their size (the texts'
    length, and ``VALUE_OVERHEAD`` per event)."""

    expires_at: float
    thread_id: str
    seqs: list[int] = attrs.field(factory=list)
    texts: list[str] = attrs.field(factory=list)
    size: int = 0


@attrs.define(eq=False)
class EventLogs:
    """The logs of the memory store's runs; ``runs`` and ``thread_runs`` are the store's own records of its runs
    (by id; each thread's run ids in the order they started), read to find what the budgets may drop."""

    runs: Mapping[str, records.RunRecord]
    thread_runs: Mapping[str, list[str]]
    clock: Callable[[], float]
    event_ttl: float
    max_thread_bytes: int
    max_threads_bytes: int
    by_run: dict[str, EventLog] = attrs.field(factory=dict, init=False)
    """Each run's log, in the order the logs were started: the order the budget of all logs drops them in."""
    _thread_bytes: dict[str, int] = attrs.field(factory=dict, init=False)
    _bytes: int = attrs.field(default=0, init=False)
    _next_purge: float = attrs.field(default=0.0, init=False)

    def checked(self, run_id: str, events: Sequence[records.EncodedEvent]) -> Batch:
        """A batch's numbers and texts for a stored run's log, checked to rise above it (``SeqConflict`` otherwise)."""
        seqs = codec.event_seqs(events)
        log = self._live(run_id)
        codec.check_rises(run_id, seqs, log.seqs[-1] if log and log.seqs else 0)
        return seqs, [text for _, text in events]

    def add(self, run_id: str, batch: Batch) -> None:
        """Append a checked batch to the run's log, refresh its expiry, and keep the logs within their budgets."""
        log = self.by_run.get(run_id)
        if log is None:
            log = self.by_run[run_id] = EventLog(0.0, self.runs[run_id].thread_id)
        log.seqs.extend(batch[0])
        log.texts.extend(batch[1])
        log.expires_at = self.clock() + self.event_ttl
        added = sum(map(len, batch[1])) + VALUE_OVERHEAD * len(batch[1])
        log.size += added
        self._bytes += added
        thread_bytes = self._thread_bytes[log.thread_id] = self._thread_bytes.get(log.thread_id, 0) + added
        if thread_bytes > self.max_thread_bytes or self._bytes > self.max_threads_bytes:
            self._fit_budgets(run_id)
        self._purge_expired()

    def read(self, run_id: str, after_seq: int) -> list[records.EventDict]:
        """The run's events with ``seq > after_seq``, decoded (``[]`` once its log expired or was dropped)."""
        log = self._live(run_id)
        if log is None:
            return []
        return [
            codec.decode_json(text) for text in log.texts[bisect.bisect_right(log.seqs, codec.seq_floor(after_seq)) :]
        ]

    def forget_thread(self, thread_id: str, run_ids: Sequence[str]) -> None:
        """Drop the logs of a forgotten thread's runs."""
        for run_id in run_ids:
            self._drop(run_id)
        self._thread_bytes.pop(thread_id, None)

    def _fit_budgets(self, writing: str) -> None:
        """Drop the logs of the oldest finished runs until the thread's logs fit ``max_thread_bytes`` and all logs
        ``max_threads_bytes``; never the log being written, nor that of a run in progress (still being read)."""
        thread_id = self.by_run[writing].thread_id
        for run_id in self.thread_runs[thread_id]:
            if self._thread_bytes[thread_id] <= self.max_thread_bytes:
                break
            if run_id != writing and run_id in self.by_run and self._finished(run_id):
                self._drop(run_id)
        for run_id in list(self.by_run):
            if self._bytes <= self.max_threads_bytes:
                break
            if run_id != writing and self._finished(run_id):
                self._drop(run_id)

    def _finished(self, run_id: str) -> bool:
        return self.runs[run_id].status is not records.RunStatus.RUNNING

    def _drop(self, run_id: str) -> None:
        """Forget a run's log (expired, over a budget, or its thread forgotten)."""
        log = self.by_run.pop(run_id, None)
        if log is not None:
            self._bytes -= log.size
            self._thread_bytes[log.thread_id] -= log.size

    def _live(self, run_id: str) -> EventLog | None:
        """The run's log, dropping it when it has expired."""
        log = self.by_run.get(run_id)
        if log is not None and log.expires_at <= self.clock():
            self._drop(run_id)
            return None
        return log

    def _purge_expired(self) -> None:
        """Drop every expired log, at most once per ``purge_interval(event_ttl)``, so unread logs do not pile up."""
        now = self.clock()
        if now < self._next_purge:
            return
        self._next_purge = now + codec.purge_interval(self.event_ttl)
        for run_id in [r for r, log in self.by_run.items() if log.expires_at <= now]:
            self._drop(run_id)
