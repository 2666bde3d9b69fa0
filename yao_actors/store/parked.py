"""Held calls in a store: a handshake-era call one process holds open, answered from another through the store.

A handshake-era MCP server asks the user while its call is open (``elicitation/create``), so the call cannot be
made again elsewhere: the process that runs it keeps it open until the answer comes. With several processes
sharing a store, the answer may come to any of them. The store carries it (issue 31)::

    holder (the process holding the call)            requester (the process the resume reached)
    hold(ticket, holder, ttl)   before the interrupt goes out
    renew(...) every ttl/3      while it holds the call  holder(ticket) → is a live process holding it?
    take_answer(...)            waits for the answer ◀── deliver(ticket, answer)   at most once
    finish(ticket, outcome)     the call's outcome   ──▶ take_outcome(ticket)      once
    release(...)                gave up (timed out, answered in process, connection lost)

An entry lives ``ttl`` seconds unless renewed: a holder that died (``kill -9``) stops renewing, and once the ttl
has passed :meth:`~yao_actors.tools.parked_relay.ParkedCalls.holder` says nobody holds the call, and :meth:`~yao_actors.tools.parked_relay.ParkedCalls.deliver` refuses an
answer. An outcome not taken is kept :data:`OUTCOME_KEEP` seconds. Answers and outcomes are JSON objects.

::

    ParkedCalls              the protocol (:mod:`yao_actors.tools.parked_relay`, which uses it); a store offers
                             it as ``store.parked_calls()``
    ├── MemoryParkedCalls    dicts and Trio events: one process (also for a store of an embedder's that has none)
    ├── SqliteParkedCalls    a ``parked_calls`` row per ticket, polled (yao_actors.store.sqlite_parked)
    └── RedisParkedCalls     a hash with a PX expiry and two lists popped with BLPOP (yao_actors.store.redis_parked)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import attrs
import trio

from yao_actors.errors import InvalidStoreInput
from yao_actors.events import encode_json

OUTCOME_KEEP: Final = 600.0
"""Seconds an answer or an outcome nobody took is kept (its taker gave up or died)."""


def encode_object(value: Mapping[str, Any], what: str) -> str:
    """An answer or an outcome as compact JSON; ``InvalidStoreInput`` for anything but a JSON object."""
    if not isinstance(value, Mapping):
        raise InvalidStoreInput(f"a held call's {what} must be a JSON object, got {value!r:.200}")
    try:
        return encode_json(dict(value))
    except (TypeError, ValueError) as error:
        raise InvalidStoreInput(f"a held call's {what} is not JSON: {error}") from None


def decode_object(text: str | bytes) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(text)
    return value


@attrs.define(eq=False)
class _Entry:
    holder: str
    expires_at: float
    answer: str | None = None
    answered: bool = False
    outcome: str | None = None
    changed: trio.Event = attrs.field(factory=trio.Event)

    def touch(self) -> None:
        self.changed.set()
        self.changed = trio.Event()


@attrs.define(eq=False)
class MemoryParkedCalls:
    """:class:`~yao_actors.tools.parked_relay.ParkedCalls` in this process's memory (expiry on Trio's clock, as :class:`MemoryLeases`)."""

    _entries: dict[str, _Entry] = attrs.field(factory=dict, init=False)

    def _live(self, ticket: str, holder: str | None = None) -> _Entry | None:
        """The entry of a call held now (by ``holder``, when given)."""
        entry = self._entries.get(ticket)
        if entry is None or entry.outcome is not None or entry.expires_at <= trio.current_time():
            return None
        return entry if holder is None or entry.holder == holder else None

    def _purge(self) -> None:
        now = trio.current_time()
        for ticket in [t for t, e in self._entries.items() if e.expires_at <= now]:
            self._entries.pop(ticket).touch()

    async def hold(self, ticket: str, holder: str, ttl: float) -> None:
        await trio.lowlevel.checkpoint()
        self._purge()
        self._entries[ticket] = _Entry(holder, trio.current_time() + ttl)

    async def renew(self, ticket: str, holder: str, ttl: float) -> bool:
        await trio.lowlevel.checkpoint()
        entry = self._live(ticket, holder)
        if entry is not None:
            entry.expires_at = trio.current_time() + ttl
        return entry is not None

    async def holder(self, ticket: str) -> str | None:
        await trio.lowlevel.checkpoint()
        entry = self._live(ticket)
        return None if entry is None else entry.holder

    async def deliver(self, ticket: str, answer: Mapping[str, Any]) -> bool:
        encoded = encode_object(answer, "answer")
        await trio.lowlevel.checkpoint()
        entry = self._live(ticket)
        if entry is None or entry.answered:
            return False
        entry.answer, entry.answered = encoded, True
        entry.touch()
        return True

    async def take_answer(self, ticket: str, holder: str, timeout: float) -> dict[str, Any] | None:  # noqa: ASYNC109
        with trio.move_on_after(timeout):
            while True:
                entry = self._live(ticket, holder)
                if entry is not None and entry.answer is not None:
                    answer, entry.answer = entry.answer, None
                    return decode_object(answer)
                if entry is None:
                    break
                await entry.changed.wait()
        await trio.lowlevel.checkpoint()
        return None

    async def finish(self, ticket: str, holder: str, outcome: Mapping[str, Any]) -> bool:
        encoded = encode_object(outcome, "outcome")
        await trio.lowlevel.checkpoint()
        entry = self._live(ticket, holder)
        if entry is None:
            return False
        entry.outcome, entry.answer = encoded, None
        entry.expires_at = trio.current_time() + OUTCOME_KEEP
        entry.touch()
        return True

    async def take_outcome(self, ticket: str, timeout: float) -> dict[str, Any] | None:  # noqa: ASYNC109
        with trio.move_on_after(timeout):
            while (entry := self._entries.get(ticket)) is not None:
                if entry.outcome is not None:
                    del self._entries[ticket]
                    return decode_object(entry.outcome)
                await entry.changed.wait()
        await trio.lowlevel.checkpoint()
        return None

    async def release(self, ticket: str, holder: str) -> None:
        await trio.lowlevel.checkpoint()
        if self._live(ticket, holder) is not None:
            self._entries.pop(ticket).touch()
