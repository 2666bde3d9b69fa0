"""Pending authorizations by OAuth ``state`` in each store (issue 32, principal identity): a state is taken once,
not after its ten minutes, not under another state or key, and never readable as plaintext."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
import trio

from tests.store.conftest import Clock
from yao_actors.auth.cipher import TokenCipher
from yao_actors.auth.states import PENDING, REUSE_MARGIN, STATE_TTL, STATES, AuthorizationStates
from yao_actors.store import ConversationStore, TokenRecords

KEY = "correct horse battery staple"
RECORD = {"principal": "alice", "server": "hub", "code_verifier": "VERIFIER-PLAINTEXT-0123456789"}


def states(store: ConversationStore, clock: Clock, key: str = KEY) -> AuthorizationStates:
    return AuthorizationStates(store.oauth_tokens(), TokenCipher(key), clock)


async def put(pending: AuthorizationStates, state: str, record: dict[str, Any]) -> None:
    """``record`` kept under ``state`` as its principal's pending authorization of server ``hub``."""
    url = f"https://as.example/authorize?state={state}"
    await pending.put(state, record, server="hub", principal=record["principal"], url=url, asked="asked")


async def test_a_state_is_taken_once(store: ConversationStore, clock: Clock) -> None:
    pending = states(store, clock)
    await put(pending, "state-1", RECORD)
    await put(pending, "state-2", {**RECORD, "principal": "bob"})
    assert await pending.take("state-1") == RECORD
    assert await pending.take("state-1") is None  # replayed
    assert await pending.take("never-given") is None
    assert (await pending.take("state-2") or {})["principal"] == "bob"


async def test_two_takers_of_one_state_get_it_once(store: ConversationStore, clock: Clock) -> None:
    pending = states(store, clock)
    await put(pending, "raced", RECORD)
    got: list[object] = []

    async def take() -> None:
        got.append(await pending.take("raced"))

    async with trio.open_nursery() as nursery:
        for _ in range(4):
            nursery.start_soon(take)
    assert got.count(RECORD) == 1
    assert got.count(None) == 3


@pytest.mark.parametrize("waited", [STATE_TTL - 1, STATE_TTL + 1])
async def test_a_state_expires_after_ten_minutes(store: ConversationStore, clock: Clock, waited: float) -> None:
    pending = states(store, clock)
    await put(pending, "late", RECORD)
    clock.advance(waited)
    assert (await pending.take("late") is None) is (waited > STATE_TTL)


async def test_expired_states_are_swept_and_tokens_kept(store: ConversationStore, clock: Clock) -> None:
    pending = states(store, clock)
    await store.oauth_tokens().save("hub", "service", "sealed-token-record")
    await put(pending, "old", RECORD)
    clock.advance(STATE_TTL + 1)
    await put(pending, "new", RECORD)
    assert await store.oauth_tokens().keys() == [(PENDING, '["hub","alice"]'), (STATES, "new"), ("hub", "service")]


async def test_a_state_does_not_open_under_another_key_and_is_sealed(store: ConversationStore, clock: Clock) -> None:
    await put(states(store, clock), "state-1", RECORD)
    sealed = await store.oauth_tokens().load(STATES, "state-1")
    assert sealed is not None
    assert "VERIFIER" not in sealed
    assert "alice" not in sealed
    assert await states(store, clock, "another key of enough length").take("state-1") is None


async def test_a_sealed_state_copied_under_another_state_does_not_open(store: ConversationStore, clock: Clock) -> None:
    """Not even under one that begins alike: a record is bound to all of its own state."""
    pending = states(store, clock)
    await put(pending, "SAMEPREFIX-given-to-alice", RECORD)
    sealed = await store.oauth_tokens().load(STATES, "SAMEPREFIX-given-to-alice")
    assert sealed is not None
    await store.oauth_tokens().save(STATES, "SAMEPREFIX-made-up", sealed)
    assert await pending.take("SAMEPREFIX-made-up") is None
    assert await pending.take("SAMEPREFIX-given-to-alice") == RECORD


# --------------------------------------------------------------------------- bounded, and O(1) per new state


class CountingCipher(TokenCipher):
    """A cipher that counts the records it opens."""

    opened = 0

    def open(self, sealed: str, record: str) -> bytes:
        self.opened += 1
        return super().open(sealed, record)


@attrs.define
class CountingRecords:
    """The store's token records, counting the calls made to them."""

    inner: TokenRecords
    calls: int = 0

    async def load(self, server: str, identity: str) -> str | None:
        self.calls += 1
        return await self.inner.load(server, identity)

    async def save(self, server: str, identity: str, sealed: str, expires_at: float | None = None) -> None:
        self.calls += 1
        await self.inner.save(server, identity, sealed, expires_at)

    async def delete(self, server: str, identity: str) -> bool:
        self.calls += 1
        return await self.inner.delete(server, identity)

    async def expire(self, server: str, now: float, most: int = 1000) -> int:
        self.calls += 1
        return await self.inner.expire(server, now, most)

    async def keys(self) -> list[tuple[str, str]]:
        self.calls += 1
        return await self.inner.keys()


async def ask(pending: AuthorizationStates, principal: str, run: int) -> str:
    """What one run of ``principal`` does: the pending authorization's URL, or a new one kept."""
    url = await pending.pending("hub", principal, "asked")
    if url is None:
        url = f"https://as.example/authorize?run={run}"
        record = {"principal": principal, "server": "hub", "code_verifier": "v" * 43}
        await pending.put(f"state-{principal}-{run}", record, server="hub", principal=principal, url=url, asked="asked")
    return url


async def stored_states(store: ConversationStore) -> list[str]:
    return [state for server, state in await store.oauth_tokens().keys() if server == STATES]


async def test_600_runs_of_a_principal_who_never_authorizes_keep_one_state_at_a_time(
    store: ConversationStore, clock: Clock
) -> None:
    """Each run asks (a minute apart): the pending authorization is given again while it has time left, then
    replaced; never more than one is stored, and no run opens more than two sealed records nor makes more than a
    handful of store calls (it used to open every stored state, 601 after 600 runs)."""
    cipher, records = CountingCipher(KEY), CountingRecords(store.oauth_tokens())
    pending = AuthorizationStates(records, cipher, clock)
    urls, most_states, most_opened, most_calls = set(), 0, 0, 0
    for run in range(600):
        cipher.opened, records.calls = 0, 0
        urls.add(await ask(pending, "alice", run))
        most_opened, most_calls = max(most_opened, cipher.opened), max(most_calls, records.calls)
        most_states = max(most_states, len(await stored_states(store)))
        clock.advance(60)
    assert most_states == 1
    assert (most_opened, most_calls) <= (2, 8), (most_opened, most_calls)
    assert len(urls) == 600 * 60 // (STATE_TTL - REUSE_MARGIN)  # a new one each time the last had too little left


async def test_a_new_state_opens_at_most_one_record_however_many_are_pending(
    store: ConversationStore, clock: Clock
) -> None:
    """600 principals each have a pending authorization; the next one opens none of theirs (at most its own
    pointer, which it has not), and when their time is up they go by the store's expiry index, unopened."""
    cipher, records = CountingCipher(KEY), CountingRecords(store.oauth_tokens())
    pending = AuthorizationStates(records, cipher, clock)
    for n in range(600):
        await ask(pending, f"p{n}", 0)
    cipher.opened, records.calls = 0, 0
    await ask(pending, "newcomer", 0)
    assert (cipher.opened, records.calls) == (0, 6)  # its pointer looked for twice, two expiries, two saves
    assert len(await stored_states(store)) == 601
    clock.advance(STATE_TTL)
    cipher.opened = 0
    await ask(pending, "late", 0)
    assert cipher.opened == 0
    assert await stored_states(store) == ["state-late-0"]
