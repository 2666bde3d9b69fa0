"""OAuth tokens in the conversation store, sealed: the :class:`TokenVault`, and the SDK's ``TokenStorage`` on it.

A record per (server, identity) holds the access and refresh tokens, when the access token expires (POSIX time)
and the client registration (the client id the authorization server gave, or the one configured), sealed as one
JSON text with :class:`~yao_actors.auth.cipher.TokenCipher`. Identities are ``"service"`` (the whole service's
login) or ``"principal:<name>"``. A vault is opened from the store and ``store.secret_key``; a durable store
without a key is refused (:func:`open_vault`). Nothing here logs a token, and no error message holds one.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

import attrs
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from yao_actors.auth.cipher import TokenCipher
from yao_actors.errors import ConfigError, TokenKeyError
from yao_actors.store.protocol import ConversationStore, TokenRecords

logger = logging.getLogger(__name__)

#: The identity of the service's own login (``identity: "service"``).
SERVICE_IDENTITY = "service"


#: What the identity of a principal's own login starts with.
PRINCIPAL_PREFIX = "principal:"


def principal_identity(principal: str) -> str:
    """The identity of ``principal``'s own login (``identity: "principal"``)."""
    return f"{PRINCIPAL_PREFIX}{principal}"


@attrs.frozen
class Grant:
    """What one record holds: the tokens, when the access token expires (POSIX time, ``None``: not said), the
    client registration, and the scopes the server last asked for beyond those granted (a step-up: the next login
    asks for them). Its repr never shows a token."""

    tokens: OAuthToken | None = attrs.field(default=None, repr=False)
    expires_at: float | None = None
    client_info: OAuthClientInformationFull | None = attrs.field(default=None, repr=False)
    wanted_scope: str | None = None
    unreadable: str | None = attrs.field(default=None, eq=False)
    """Why the stored record could not be read (it does not open with ``store.secret_key``): this grant is empty
    in its place, so the tokens count as absent and must be authorized again. Never stored."""

    def usable(self, now: float, *, configured_client: bool = False) -> bool:
        """Whether the tokens can serve a call without a person: an access token not yet expired, or a refresh
        token and a client to refresh as (the registration kept here, or one the configuration names)."""
        if self.tokens is None:
            return False
        fresh = self.expires_at is None or now < self.expires_at
        client = self.client_info is not None or configured_client
        return fresh or (self.tokens.refresh_token is not None and client)

    def to_json(self) -> bytes:
        data: dict[str, Any] = {
            "tokens": None if self.tokens is None else self.tokens.model_dump(mode="json", exclude_none=True),
            "expires_at": self.expires_at,
            "client_info": None if self.client_info is None else self.client_info.model_dump(mode="json"),
        }
        if self.wanted_scope is not None:
            data["wanted_scope"] = self.wanted_scope
        return json.dumps(data, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, text: bytes) -> Grant:
        data = json.loads(text)
        tokens, info = data.get("tokens"), data.get("client_info")
        return cls(
            tokens=None if tokens is None else OAuthToken.model_validate(tokens),
            expires_at=data.get("expires_at"),
            client_info=None if info is None else OAuthClientInformationFull.model_validate(info),
            wanted_scope=data.get("wanted_scope"),
        )


@attrs.frozen
class TokenVault:
    """Sealed grants by (server, identity) in a store's :class:`~yao_actors.store.protocol.TokenRecords`."""

    records: TokenRecords
    cipher: TokenCipher
    unreadable: set[tuple[str, str]] = attrs.field(factory=set, eq=False, repr=False)
    """The records found not to open with the key (each told to the log once: :meth:`StoreTokenStorage.load`)."""

    async def load(self, server: str, identity: str) -> Grant:
        """The record's grant (empty when there is none); :class:`~yao_actors.errors.TokenKeyError` when it does
        not open with the key."""
        sealed = await self.records.load(server, identity)
        if sealed is None:
            return Grant()
        return Grant.from_json(self.cipher.open(sealed, _record(server, identity)))

    async def save(self, server: str, identity: str, grant: Grant) -> None:
        await self.records.save(server, identity, self.cipher.seal(grant.to_json(), _record(server, identity)))

    async def forget(self, server: str, identity: str) -> bool:
        """Drop the record (a logout); whether there was one."""
        return await self.records.delete(server, identity)

    async def keys(self) -> list[tuple[str, str]]:
        """Every record's (server, identity)."""
        return await self.records.keys()


def _record(server: str, identity: str) -> str:
    """How a record is named in errors and in its sealed text's associated data."""
    return f"server {server!r} ({identity})"


def open_vault(store: ConversationStore, secret_key: str | None) -> TokenVault:
    """The vault of ``store``, sealed under ``secret_key``; a durable store needs one (:class:`ConfigError`
    naming ``store.secret_key``), a memory store without one seals under a key of this process."""
    if secret_key is None and store.durable:
        raise ConfigError(
            ["store.secret_key: required to keep OAuth tokens in a durable store (the key they are encrypted with)"]
        )
    return TokenVault(store.oauth_tokens(), TokenCipher(secret_key))


@attrs.define
class StoreTokenStorage:
    """The SDK's ``TokenStorage`` for one (server, identity), on a :class:`TokenVault`.

    It remembers when the access token expires (``expires_at``, by ``clock``): the SDK's own storage keeps
    only ``expires_in``, which means nothing once read back in another process.
    """

    vault: TokenVault
    server: str
    identity: str
    clock: Callable[[], float] = time.time
    held: OAuthToken | None = attrs.field(default=None, repr=False)
    """The tokens the connection using this storage holds (read at its start, or stored by its refresh)."""

    async def load(self) -> Grant:
        """The record's grant; one that does not open with ``store.secret_key`` counts as absent (an empty grant
        saying why): a connection then needs a login, a principal is asked again. The operator is told once per
        record and process, by a WARNING naming ``store.secret_key`` (else only a server "needs auth" would show)."""
        try:
            return await self.vault.load(self.server, self.identity)
        except TokenKeyError as error:
            if (self.server, self.identity) not in self.vault.unreadable:
                self.vault.unreadable.add((self.server, self.identity))
                logger.warning("%s; until then they count as absent and must be authorized again", error)
            return Grant(unreadable=str(error))

    async def get_tokens(self) -> OAuthToken | None:
        return (await self.load()).tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        """Keep the tokens a login or a refresh brought, in the record; none when the record is gone (a logout
        while a connection held the tokens in memory: its refresh does not log it back in)."""
        expires_at = None if tokens.expires_in is None else self.clock() + int(tokens.expires_in)
        self.held = tokens
        if await self.vault.records.load(self.server, self.identity) is None:
            return
        grant = await self.load()
        await self.vault.save(self.server, self.identity, attrs.evolve(grant, tokens=tokens, expires_at=expires_at))

    async def drop_tokens(self) -> None:
        """Forget the tokens this connection :attr:`held` and keep the client registration (a login must happen
        again); tokens stored meanwhile by another connection or process (its refresh, with a refresh token
        rotated since) are newer and kept: the connection reconnects with them."""
        grant = await self.load()
        if grant.tokens is not None and self.held is not None and grant.tokens != self.held:
            return
        await self.vault.save(self.server, self.identity, attrs.evolve(grant, tokens=None, expires_at=None))

    async def want_scope(self, scope: str | None) -> None:
        """Remember the scopes a step-up asked for (the server's ``403 insufficient_scope``), for the next login."""
        grant = await self.load()
        await self.vault.save(self.server, self.identity, attrs.evolve(grant, wanted_scope=scope))

    async def set_client_info_none(self) -> None:
        """Forget the client registration (the next flow registers again)."""
        grant = await self.load()
        await self.vault.save(self.server, self.identity, attrs.evolve(grant, client_info=None))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return (await self.load()).client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        grant = await self.load()
        await self.vault.save(self.server, self.identity, attrs.evolve(grant, client_info=client_info))
