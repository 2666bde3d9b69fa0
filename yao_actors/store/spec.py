"""The ``store`` configuration section and :func:`open_store`.

::

    "store": {"type": "memory"}
    "store": {"type": "sqlite", "path": "/var/lib/yao/conversations.sqlite3", "event_ttl": 86400, "exclusive": false}
    "store": {"type": "redis", "url": "redis://127.0.0.1:6379/0", "prefix": "yao:", "lease_ttl": 10, "lease_wait": 30}


The records (:class:`StoreSpec`, :func:`default_sqlite_path`) live in :mod:`yao_actors.specs` with the rest
of the configuration; they are re-exported here.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, cast

import attrs

from yao_actors.errors import ConfigError
from yao_actors.specs import DEFAULT_EVENT_TTL, DEFAULT_LEASE_TTL, DEFAULT_LEASE_WAIT, StoreType
from yao_actors.specs import StoreSpec as StoreSpec  # re-exported
from yao_actors.specs import default_sqlite_path as default_sqlite_path  # re-exported
from yao_actors.store.memory import MemoryStore
from yao_actors.store.protocol import ConversationStore
from yao_actors.store.sqlite import open_sqlite_store

_KEYS: Mapping[str, tuple[str, ...]] = {
    "memory": ("type", "event_ttl", "lease_ttl", "lease_wait", "secret_key"),
    "sqlite": ("type", "path", "event_ttl", "lease_ttl", "lease_wait", "exclusive", "secret_key"),
    "redis": ("type", "url", "prefix", "event_ttl", "lease_ttl", "lease_wait", "secret_key"),
}
#: The fewest characters ``store.secret_key`` may have.
MIN_SECRET_KEY = 16


def parse_store_spec(data: Any, key_path: str = "store") -> StoreSpec:
    """Validate a decoded ``store`` section; a :class:`~yao_actors.errors.ConfigError` names each problem's key path."""
    problems: list[str] = []

    def fail(key: str, message: str) -> None:
        problems.append(f"{key_path}.{key}: {message}" if key else f"{key_path}: {message}")

    if not isinstance(data, dict):
        raise ConfigError([f"{key_path}: expected an object, got {type(data).__name__}"])
    kind = data.get("type")
    if not isinstance(kind, str) or kind not in _KEYS:
        fail("type", f"must be one of {', '.join(repr(k) for k in _KEYS)}, got {kind!r}")
        raise ConfigError(problems)
    for key in data:
        if key not in _KEYS[kind]:
            fail(key, f"unknown key for a {kind} store (allowed: {', '.join(_KEYS[kind])})")
    for key in ("path", "url", "prefix"):
        if key in data and key in _KEYS[kind] and (not isinstance(data[key], str) or not data[key]):
            fail(key, f"expected a non-empty string, got {data[key]!r}")
    key = data.get("secret_key")
    if "secret_key" in data and (not isinstance(key, str) or len(key) < MIN_SECRET_KEY):
        fail(
            "secret_key",
            f"expected a string of at least {MIN_SECRET_KEY} characters (the key OAuth tokens are encrypted with; "
            "make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))')",
        )
    if kind == "redis" and isinstance(data.get("url"), str) and not data["url"].startswith(("redis://", "rediss://")):
        fail("url", f"expected a redis:// or rediss:// URL, got {data['url']!r}")
    if kind == "sqlite" and not isinstance(data.get("exclusive", False), bool):
        fail("exclusive", f"expected true or false, got {data['exclusive']!r}")
    if kind == "sqlite" and "path" not in data:
        fail("path", "required for a sqlite store")
    if kind == "redis" and "url" not in data:
        fail("url", "required for a redis store")
    seconds = {"event_ttl": DEFAULT_EVENT_TTL, "lease_ttl": DEFAULT_LEASE_TTL, "lease_wait": DEFAULT_LEASE_WAIT}
    for key, default in seconds.items():
        value = seconds[key] = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
            fail(key, f"expected a number of seconds > 0, got {value!r}")
    if problems:
        raise ConfigError(problems)
    return StoreSpec(
        cast(StoreType, kind),
        path=data.get("path"),
        url=data.get("url"),
        prefix=data.get("prefix", "yao:"),
        event_ttl=float(seconds["event_ttl"]),
        lease_ttl=float(seconds["lease_ttl"]),
        lease_wait=float(seconds["lease_wait"]),
        exclusive=data.get("exclusive"),
        secret_key=data.get("secret_key"),
    )


def alone(spec: StoreSpec) -> StoreSpec:
    """The store of a process that knows it is the only one on the store (a lone ``yao-actors serve``): an SQLite
    store whose ``exclusive`` is not said becomes exclusive (no memory-mapped ``-shm``, nothing done to a file
    can kill the process); anything else as it is."""
    return attrs.evolve(spec, exclusive=True) if spec.type == "sqlite" and spec.exclusive is None else spec


def check_shared(spec: StoreSpec, processes: int) -> None:
    """Refuse an exclusive store for ``processes`` > 1 sharing it (:class:`ConfigError`)."""
    if processes > 1 and spec.exclusive:
        raise ConfigError(
            [f"store.exclusive: true keeps the SQLite file to one process, so {processes} workers cannot share it"]
        )


@asynccontextmanager
async def open_store(spec: StoreSpec, *, clock: Callable[[], float] = time.time) -> AsyncIterator[ConversationStore]:
    """Open the store ``spec`` names, and close it on exit.

    The runs a dead process left running are closed once their thread's lease has expired, by a runtime's
    sweep (:mod:`yao_actors.store.leases`), not here: other live processes may share the store.

    Raises :class:`~yao_actors.errors.StoreUnavailable` when a durable store
    cannot be reached or opened. ``clock`` gives POSIX time (tests move it).
    """
    if spec.type == "memory":
        yield MemoryStore(event_ttl=spec.event_ttl, clock=clock)
        return
    opened: Any
    if spec.type == "sqlite":
        assert spec.path is not None
        opened = open_sqlite_store(spec.path, event_ttl=spec.event_ttl, exclusive=bool(spec.exclusive), clock=clock)
    else:
        assert spec.url is not None
        try:
            from yao_actors.store.redis import open_redis_store  # coredis is an optional dependency
        except ImportError as error:
            raise ConfigError([f"store.type: 'redis' needs {error.name}: pip install 'yao-actors[redis]'"]) from error
        opened = open_redis_store(spec.url, prefix=spec.prefix, event_ttl=spec.event_ttl, clock=clock)
    async with opened as store:
        yield store


def service_store(configured: StoreSpec | None, choice: str | None, *, name: str | None = None) -> StoreSpec:
    """The service's store: ``--store`` if given, else the config's, else SQLite at :func:`default_sqlite_path`
    under ``name`` (so the service keeps its threads across restarts with no set-up, apart from other services')."""
    if choice == "memory":
        return StoreSpec("memory")
    default = StoreSpec.sqlite(default_sqlite_path(name=name))
    if choice == "sqlite" and (configured is None or configured.type != "sqlite"):
        return default
    return configured or default


def default_store_name(config_path: str | None, port: int) -> str:
    """What names a service's default SQLite file: its config file (its name, and a digest of where it is, so two
    ``config.json`` elsewhere differ), or with the embedded config its port. Two services share threads only by
    sharing a config file (or, with no config, a port)."""
    if config_path is None:
        return f"port-{port}"
    where = os.path.abspath(config_path)
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", os.path.splitext(os.path.basename(where))[0]).strip("-.") or "config"
    return f"{stem}-{hashlib.sha256(os.fsencode(where)).hexdigest()[:8]}"
