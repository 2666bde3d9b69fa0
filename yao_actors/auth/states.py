"""Pending authorizations by their OAuth ``state``: single use, expiring, sealed, in the conversation store.

When a principal is sent to authorize a server (:mod:`yao_actors.auth.asking`), what the callback needs to
finish the flow — the principal, the server, the PKCE verifier, the client registration, the token endpoint —
is kept under the ``state`` the authorization URL carries. :meth:`AuthorizationStates.take` gives it back at
most once, and only within :data:`STATE_TTL` seconds of :meth:`AuthorizationStates.put`: a wrong, replayed or
late ``state`` finds nothing. The records live in the store's token records (:mod:`yao_actors.store.tokens`)
under the reserved server name :data:`STATES`, sealed like the tokens, so every worker sharing the store (SQLite,
Redis) finishes a flow another began. A take reads the record, then deletes it: only the caller whose delete
removed it gets it (two callbacks racing with one ``state`` cannot both win).
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
from yao_actors.store.tokens import TokenRecords

#: Seconds a pending authorization waits for its callback.
STATE_TTL: Final = 600.0
#: The server name the pending authorizations are kept under, beside the tokens (no configured server has it).
STATES: Final = "(oauth-state)"


@attrs.frozen
class AuthorizationStates:
    """Pending authorizations by ``state`` in ``records``, sealed with ``cipher``; time by ``clock``."""

    records: TokenRecords
    cipher: TokenCipher
    clock: Callable[[], float] = time.time
    ttl: float = STATE_TTL

    async def put(self, state: str, record: Mapping[str, Any]) -> None:
        """Keep ``record`` (JSON-ready) under ``state`` for :attr:`ttl` seconds; drops the expired ones first."""
        now = self.clock()
        await self.sweep(now)
        text = json.dumps({"expires_at": now + self.ttl, "record": dict(record)}, separators=(",", ":"))
        await self.records.save(STATES, state, self.cipher.seal(text.encode(), _name(state)))

    async def take(self, state: str) -> dict[str, Any] | None:
        """The record kept under ``state``, removed; ``None`` when there is none, it was taken, or it expired."""
        sealed = await self.records.load(STATES, state)
        if sealed is None or not await self.records.delete(STATES, state):
            return None
        kept = self._open(state, sealed)
        if kept is None or self.clock() >= float(kept["expires_at"]):
            return None
        record: dict[str, Any] = kept["record"]
        return record

    async def sweep(self, now: float) -> int:
        """Drop the records past their expiry (and any that do not open); how many."""
        dropped = 0
        for server, state in await self.records.keys():
            if server != STATES:
                continue
            sealed = await self.records.load(STATES, state)
            kept = None if sealed is None else self._open(state, sealed)
            if kept is None or now >= float(kept["expires_at"]):
                dropped += await self.records.delete(STATES, state)
        return dropped

    def _open(self, state: str, sealed: str) -> dict[str, Any] | None:
        try:
            kept: dict[str, Any] = json.loads(self.cipher.open(sealed, _name(state)))
        except (TokenKeyError, ValueError):  # another key, or not ours: as good as absent
            return None
        return kept


def _name(state: str) -> str:
    """The sealed text's associated data: a record opens only under its own ``state`` (all of it, by its digest:
    not a prefix another state may share)."""
    return f"pending authorization {hashlib.sha256(state.encode()).hexdigest()}"
