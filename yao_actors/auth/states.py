"""Pending authorizations by their OAuth ``state``: single use, expiring, sealed, in the conversation store.

When a principal is sent to authorize a server (:mod:`yao_actors.auth.asking`), what the callback needs to
finish the flow — the principal, the server, the PKCE verifier, the client registration, the token endpoint —
is kept under the ``state`` the authorization URL carries. :meth:`AuthorizationStates.take` gives it back at
most once, and only within :data:`STATE_TTL` seconds of :meth:`AuthorizationStates.put`: a wrong, replayed or
late ``state`` finds nothing. The records live in the store's token records (:class:`~yao_actors.store.protocol.TokenRecords`)
under the reserved server name :data:`STATES`, sealed like the tokens, so every worker sharing the store (SQLite,
Redis) finishes a flow another began. A take reads the record, then deletes it: only the caller whose delete
removed it gets it (two callbacks racing with one ``state`` cannot both win).

**Bounded, and O(1) per principal.** A principal who never authorizes must not leave a state per run behind,
nor make each new one cost more than the last. So each (server, principal) has one pending authorization: a
pointer under :data:`PENDING` names its state and URL, :meth:`AuthorizationStates.pending` gives that URL back to
the principal's next runs while at least :data:`REUSE_MARGIN` seconds of it are left (the interrupt's id is the
same; now its URL is too), and a new one replaces it (the superseded state is dropped). Expired records go by
the store's expiry index (:meth:`~yao_actors.store.protocol.TokenRecords.expire`), never by opening them: a new
state opens at most one sealed record (the principal's pointer), however many others are pending.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs

from yao_actors.auth.cipher import TokenCipher
from yao_actors.errors import TokenKeyError
from yao_actors.store.protocol import TokenRecords

#: Seconds a pending authorization waits for its callback.
STATE_TTL: Final = 600.0
#: The server name the pending authorizations are kept under, beside the tokens (no configured server has it).
STATES: Final = "(oauth-state)"
#: The server name of each (server, principal)'s pointer to its pending authorization: its state and URL.
PENDING: Final = "(oauth-pending)"
#: Seconds a pending authorization must have left to be given to the principal's next run again (else a new one).
REUSE_MARGIN: Final = STATE_TTL / 2


@attrs.frozen
class AuthorizationStates:
    """Pending authorizations by ``state`` in ``records``, sealed with ``cipher``; time by ``clock``."""

    records: TokenRecords
    cipher: TokenCipher
    clock: Callable[[], float] = time.time
    ttl: float = STATE_TTL

    async def pending(self, server: str, principal: str, asked: str) -> str | None:
        """The URL of ``principal``'s pending authorization of ``server``, asked the same way (``asked``: what the
        URL was made from) and good for :data:`REUSE_MARGIN` seconds more; ``None`` when there is none."""
        pointer = await self._pointer(server, principal)
        if pointer is None or pointer["asked"] != asked or self.clock() + REUSE_MARGIN >= pointer["expires_at"]:
            return None
        if await self.records.load(STATES, pointer["state"]) is None:  # taken meanwhile (a refused callback)
            return None
        return str(pointer["url"])

    async def put(
        self, state: str, record: Mapping[str, Any], *, server: str, principal: str, url: str, asked: str
    ) -> None:
        """Keep ``record`` (JSON-ready) under ``state`` for :attr:`ttl` seconds, as ``principal``'s pending
        authorization of ``server`` at ``url`` (asked as ``asked``); the one it replaces is dropped, and the
        expired ones go first (by the store's index)."""
        now = self.clock()
        await self.records.expire(STATES, now)
        await self.records.expire(PENDING, now)
        replaced = await self._pointer(server, principal)
        expires_at = now + self.ttl
        text = json.dumps({"expires_at": expires_at, "record": dict(record)}, separators=(",", ":"))
        await self.records.save(STATES, state, self.cipher.seal(text.encode(), _name(state)), expires_at)
        pointer = {"state": state, "url": url, "asked": asked, "expires_at": expires_at}
        key = _pair(server, principal)
        sealed = self.cipher.seal(json.dumps(pointer, separators=(",", ":")).encode(), _name(key, "pending pointer"))
        await self.records.save(PENDING, key, sealed, expires_at)
        if replaced is not None and replaced["state"] != state:
            await self.records.delete(STATES, str(replaced["state"]))

    async def take(self, state: str) -> dict[str, Any] | None:
        """The record kept under ``state``, removed (its principal's pointer too); ``None`` when there is none, it
        was taken, or it expired."""
        sealed = await self.records.load(STATES, state)
        if sealed is None or not await self.records.delete(STATES, state):
            return None
        kept = self._open(_name(state), sealed)
        if kept is None or self.clock() >= float(kept["expires_at"]):
            return None
        record: dict[str, Any] = kept["record"]
        await self.records.delete(PENDING, _pair(str(record.get("server")), str(record.get("principal"))))
        return record

    async def _pointer(self, server: str, principal: str) -> dict[str, Any] | None:
        key = _pair(server, principal)
        sealed = await self.records.load(PENDING, key)
        return None if sealed is None else self._open(_name(key, "pending pointer"), sealed)

    def _open(self, name: str, sealed: str) -> dict[str, Any] | None:
        try:
            kept: dict[str, Any] = json.loads(self.cipher.open(sealed, name))
        except (TokenKeyError, ValueError):  # another key, or not ours: as good as absent
            return None
        return kept


def _name(state: str, kind: str = "pending authorization") -> str:
    """The sealed text's associated data: a record opens only under its own ``state`` (all of it, by its digest:
    not a prefix another state may share), and as its own ``kind`` (a pointer is not a state)."""
    return f"{kind} {hashlib.sha256(state.encode()).hexdigest()}"


def _pair(server: str, principal: str) -> str:
    """The record name of the pointer of ``principal``'s pending authorization of ``server`` (a JSON pair: no
    two pairs give one name)."""
    return json.dumps([server, principal], separators=(",", ":"))
