"""Pending authorizations by OAuth ``state`` in each store (issue 32, principal identity): a state is taken once,
not after its ten minutes, not under another state or key, and never readable as plaintext."""

from __future__ import annotations

import pytest
import trio

from tests.store.conftest import Clock
from yao_actors.auth.cipher import TokenCipher
from yao_actors.auth.states import STATE_TTL, STATES, AuthorizationStates
from yao_actors.store import ConversationStore

KEY = "correct horse battery staple"
RECORD = {"principal": "alice", "server": "hub", "code_verifier": "VERIFIER-PLAINTEXT-0123456789"}


def states(store: ConversationStore, clock: Clock, key: str = KEY) -> AuthorizationStates:
    return AuthorizationStates(store.oauth_tokens(), TokenCipher(key), clock)


async def test_a_state_is_taken_once(store: ConversationStore, clock: Clock) -> None:
    pending = states(store, clock)
    await pending.put("state-1", RECORD)
    await pending.put("state-2", {**RECORD, "principal": "bob"})
    assert await pending.take("state-1") == RECORD
    assert await pending.take("state-1") is None  # replayed
    assert await pending.take("never-given") is None
    assert (await pending.take("state-2") or {})["principal"] == "bob"


async def test_two_takers_of_one_state_get_it_once(store: ConversationStore, clock: Clock) -> None:
    pending = states(store, clock)
    await pending.put("raced", RECORD)
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
    await pending.put("late", RECORD)
    clock.advance(waited)
    assert (await pending.take("late") is None) is (waited > STATE_TTL)


async def test_expired_states_are_swept_and_tokens_kept(store: ConversationStore, clock: Clock) -> None:
    pending = states(store, clock)
    await store.oauth_tokens().save("hub", "service", "sealed-token-record")
    await pending.put("old", RECORD)
    clock.advance(STATE_TTL + 1)
    await pending.put("new", RECORD)
    assert await store.oauth_tokens().keys() == [(STATES, "new"), ("hub", "service")]


async def test_a_state_does_not_open_under_another_key_and_is_sealed(store: ConversationStore, clock: Clock) -> None:
    await states(store, clock).put("state-1", RECORD)
    sealed = await store.oauth_tokens().load(STATES, "state-1")
    assert sealed is not None
    assert "VERIFIER" not in sealed
    assert "alice" not in sealed
    assert await states(store, clock, "another key of enough length").take("state-1") is None


async def test_a_sealed_state_copied_under_another_state_does_not_open(store: ConversationStore, clock: Clock) -> None:
    """Not even under one that begins alike: a record is bound to all of its own state."""
    pending = states(store, clock)
    await pending.put("SAMEPREFIX-given-to-alice", RECORD)
    sealed = await store.oauth_tokens().load(STATES, "SAMEPREFIX-given-to-alice")
    assert sealed is not None
    await store.oauth_tokens().save(STATES, "SAMEPREFIX-made-up", sealed)
    assert await pending.take("SAMEPREFIX-made-up") is None
    assert await pending.take("SAMEPREFIX-given-to-alice") == RECORD
