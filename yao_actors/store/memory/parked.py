"""Held calls in this process's memory: dicts and Trio events (the memory store's; expiry on Trio's clock, as
:class:`~yao_actors.store.memory.leases.MemoryLeases`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import trio

from yao_actors.store.codec import decode_json, encode_object
from yao_actors.store.protocol import OUTCOME_KEEP


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
    """:class:`~yao_actors.store.protocol.ParkedCalls` in this process's memory."""

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
                    return decode_json(answer)
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
                    return decode_json(entry.outcome)
                await entry.changed.wait()
        await trio.lowlevel.checkpoint()
        return None

    async def release(self, ticket: str, holder: str) -> None:
        await trio.lowlevel.checkpoint()
        if self._live(ticket, holder) is not None:
            self._entries.pop(ticket).touch()
