"""OAuth token records in the memory store: a dict of sealed texts, another of their expiries."""

from __future__ import annotations

import attrs
import trio

from yao_actors.store.protocol import EXPIRE_BATCH


@attrs.define
class MemoryTokens:
    """Token records in a dict (the memory store's), their expiries in another."""

    _records: dict[tuple[str, str], str] = attrs.field(factory=dict)
    _expiries: dict[tuple[str, str], float] = attrs.field(factory=dict)

    async def load(self, server: str, identity: str) -> str | None:
        await trio.lowlevel.checkpoint()
        return self._records.get((server, identity))

    async def save(self, server: str, identity: str, sealed: str, expires_at: float | None = None) -> None:
        await trio.lowlevel.checkpoint()
        self._records[server, identity] = sealed
        if expires_at is None:
            self._expiries.pop((server, identity), None)
        else:
            self._expiries[server, identity] = expires_at

    async def delete(self, server: str, identity: str) -> bool:
        await trio.lowlevel.checkpoint()
        self._expiries.pop((server, identity), None)
        return self._records.pop((server, identity), None) is not None

    async def expire(self, server: str, now: float, most: int = EXPIRE_BATCH) -> int:
        await trio.lowlevel.checkpoint()
        gone = [key for key, expires_at in self._expiries.items() if key[0] == server and expires_at <= now][:most]
        for key in gone:
            del self._expiries[key]
            del self._records[key]
        return len(gone)

    async def keys(self) -> list[tuple[str, str]]:
        await trio.lowlevel.checkpoint()
        return sorted(self._records)
