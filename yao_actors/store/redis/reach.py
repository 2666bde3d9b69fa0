"""How the Redis store meets trouble: whatever goes wrong in Redis leaves it as
:class:`~yao_actors.errors.StoreUnavailable`, whose message never shows the server's password."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import coredis.exceptions

from yao_actors.errors import StoreUnavailable

_UNREACHABLE = (coredis.exceptions.ConnectionError, coredis.exceptions.AuthenticationError, OSError)


@contextmanager
def reachable(url: str) -> Iterator[None]:
    """Turn whatever goes wrong in Redis into :class:`StoreUnavailable`: the ways a server can be out of reach
    (connection refused or lost, timeouts, authentication, a reply that is not the protocol), and any error
    answer (``WRONGTYPE``, ``OOM``, ``READONLY``, a script error, ...), which no caller can do anything else with."""
    where = shown_url(url)  # the message reaches the log: never the password; clients hear only what is shown
    try:
        yield
    except _UNREACHABLE as error:
        raise StoreUnavailable(
            f"Redis store at {where} is unreachable: {error}", shown="Redis is unreachable"
        ) from error
    except coredis.exceptions.RedisError as error:
        kind = type(error).__name__
        raise StoreUnavailable(
            f"Redis store at {where} answered with an error ({kind}): {error}",
            shown=f"Redis answered with an error ({kind})",
        ) from error


def shown_url(url: str) -> str:
    """``url`` as messages may show it: its password (``redis://user:secret@host``) replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = f"{parts.username}:" if parts.username else ":"
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{user}***@{host}"))
