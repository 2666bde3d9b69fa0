"""What the package's own backends (memory, SQLite, Redis) share beyond the protocol: the parts a store is made of
beside its threads and runs, held once; and a run's turn written as one write, with or without the run's close and
its lease's release.

A store of one's own may build on :class:`BackendStore` too; :class:`~yao_actors.store.protocol.ConversationStore`
stays the whole contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, NamedTuple, TypeVar

import attrs

from yao_actors.store.protocol import ConversationStore, ParkedCalls, ThreadLeases, TokenRecords
from yao_actors.store.records import EncodedEvent, Message, RunFinish

L = TypeVar("L", bound=ThreadLeases)
P = TypeVar("P", bound=ParkedCalls)


@attrs.frozen
class StoreParts(Generic[L, P]):
    """A backend's thread leases, sealed token records and held calls: made once with the store, the same objects
    at every call of :meth:`~ConversationStore.leases`, :meth:`~ConversationStore.oauth_tokens` and
    :meth:`~ConversationStore.parked_calls`."""

    leases: L
    tokens: TokenRecords
    parked: P


class Turn(NamedTuple):
    """One write of a running run (:meth:`BackendStore.write_turn`): a turn of its history and a batch of its
    events, as :meth:`~ConversationStore.append_turn` takes them; with ``finish``, the run's close in the same
    write; with ``release`` too (a lease token), the thread's lease that token holds given up in it. (A tuple: one
    is made per write, on every run's path.)"""

    thread_id: str
    run_id: str
    messages: Sequence[Message]
    events: Sequence[EncodedEvent]
    finish: RunFinish | None = None
    release: str | None = None


class BackendStore(ConversationStore, Generic[L, P]):
    """A store holding its :class:`StoreParts` (:attr:`parts`) and writing a turn, the run's close and the lease's
    release as one write (:meth:`write_turn`), which both :meth:`append_turn` and :meth:`append_last_turn` are."""

    parts: StoreParts[L, P]

    def leases(self) -> L:
        return self.parts.leases

    def oauth_tokens(self) -> TokenRecords:
        return self.parts.tokens

    def parked_calls(self) -> P:
        return self.parts.parked

    async def append_turn(
        self,
        thread_id: str,
        run_id: str,
        messages: Sequence[Message],
        events: Sequence[EncodedEvent],
        *,
        finish: RunFinish | None = None,
    ) -> Sequence[int] | None:
        return await self.write_turn(Turn(thread_id, run_id, messages, events, finish))

    async def append_last_turn(
        self,
        thread_id: str,
        run_id: str,
        messages: Sequence[Message],
        events: Sequence[EncodedEvent],
        finish: RunFinish,
        *,
        release: str,
    ) -> Sequence[int] | None:
        """The close-out and the lease's release in one write."""
        return await self.write_turn(Turn(thread_id, run_id, messages, events, finish, release))

    async def write_turn(self, turn: Turn) -> Sequence[int] | None:
        """Write ``turn`` all or nothing, refusing it as :meth:`~ConversationStore.append_turn` says (and, with
        ``turn.release``, giving the thread's lease up when that token still holds it); the messages' sizes when
        the store measured them, else ``None``."""
        ...
