"""OAuth tokens sealed at rest: AES-256-GCM under a key derived from ``store.secret_key`` with HKDF-SHA256.

``store.secret_key`` is any string of at least 16 characters (not base64: its UTF-8 bytes are the HKDF input);
HKDF-SHA256 with a fixed salt and info turns it into the 32-byte AES key. Each sealed text is
``v1.`` + base64url(12-byte random nonce + ciphertext + 16-byte tag), and its associated data names the record
(server and identity), so a sealed text copied to another record does not open. A memory store with no key
seals under a random key of the process (its tokens die with it anyway).
"""

from __future__ import annotations

import base64
import os
from typing import Final

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from yao_actors.errors import TokenKeyError

_SALT: Final = b"yao-actors/oauth-tokens"
_INFO: Final = b"yao-actors oauth tokens v1 aes-256-gcm"
_VERSION: Final = "v1."
_NONCE: Final = 12


def derive_key(secret_key: str) -> bytes:
    """The 32-byte AES key of ``secret_key`` (HKDF-SHA256, fixed salt and info)."""
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=_SALT, info=_INFO).derive(secret_key.encode())


class TokenCipher:
    """Seals and opens texts under one key; the key never leaves the object (its repr does not show it)."""

    def __init__(self, secret_key: str | None) -> None:
        self._aead = AESGCM(derive_key(secret_key) if secret_key is not None else AESGCM.generate_key(256))

    def __repr__(self) -> str:
        return "TokenCipher(<key hidden>)"

    def seal(self, plaintext: bytes, record: str) -> str:
        """``plaintext`` sealed for ``record`` (the associated data)."""
        nonce = os.urandom(_NONCE)
        sealed = nonce + self._aead.encrypt(nonce, plaintext, record.encode())
        return _VERSION + base64.urlsafe_b64encode(sealed).decode("ascii")

    def open(self, sealed: str, record: str) -> bytes:
        """The plaintext :meth:`seal` sealed for ``record``; :class:`TokenKeyError` when it does not open."""
        if not sealed.startswith(_VERSION):
            raise TokenKeyError(f"the stored tokens of {record} are not in a format this version reads")
        try:
            raw = base64.urlsafe_b64decode(sealed.removeprefix(_VERSION))
            return self._aead.decrypt(raw[:_NONCE], raw[_NONCE:], record.encode())
        except (InvalidTag, ValueError):
            raise TokenKeyError(
                f"the stored tokens of {record} do not open with store.secret_key: the key is wrong or changed "
                "since they were stored (set the key they were stored with, or log in again)"
            ) from None
