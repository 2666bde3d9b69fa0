"""The keys of a Redis store: every id a client chose is escaped, so no id can name another key (issue 29).

A key is the store's prefix, a kind word, and for most kinds an id and a suffix, joined by ``:``. Ids come from
clients (thread and run ids) or the configuration (principal names) and may hold anything, ``:`` included: put in
a key as they are, thread ``x:messages`` would name the history list of thread ``x``, and run ``r:events`` the
event stream of run ``r`` (a ``WRONGTYPE`` error at best, another principal's data at worst). So each id goes
into a key escaped (:func:`escape`): ``%`` becomes ``%25`` and ``:`` becomes ``%3A``. An escaped id holds no
``:``, so a key splits on ``:`` into its kind word, the one escaped id and the suffix, which name the (kind, id)
pair it was built from and nothing else; and percent-escaping is undone one way only. An id without ``:`` or
``%`` is its own escape, so keys of such ids are what they were before ids were escaped, and a store written
then stays readable; a thread or run whose id holds ``:`` or ``%`` and was stored before is not found any more
(its keys, written unescaped, are left as they were).

The store's scripts build some keys themselves from ids they read (the runs of a thread being forgotten, the
thread's last run a lease closes): :data:`ESCAPE_LUA` is the same escape for them. Lua strings are bytes, and in
UTF-8 the bytes of ``:`` and ``%`` occur only as those characters, so both escape the same text the same way.
"""

from __future__ import annotations

from typing import Final

import attrs

_ESCAPES: Final = (("%", "%25"), (":", "%3A"))
"""What :func:`escape` replaces, ``%`` first (so the ``%`` of an escape is never escaped again)."""

ESCAPE_LUA: Final = "local function escape(id) return (string.gsub(id, '[%%:]', {['%'] = '%25', [':'] = '%3A'})) end\n"
"""The Lua function ``escape(id)``, as :func:`escape` (put before the scripts that build keys from ids)."""


def escape(identifier: str) -> str:
    """``identifier`` as it goes into a key: ``%`` → ``%25``, ``:`` → ``%3A``; an id with neither is unchanged."""
    if "%" not in identifier and ":" not in identifier:
        return identifier
    for character, escaped in _ESCAPES:
        identifier = identifier.replace(character, escaped)
    return identifier


def unescape(escaped: str) -> str:
    """The id :func:`escape` made ``escaped`` from."""
    return escaped.replace("%3A", ":").replace("%25", "%")


@attrs.frozen
class RedisKeys:
    """The keys of a store under ``prefix`` (the table is the :mod:`yao_actors.store.redis` docstring's)."""

    prefix: str

    def _of(self, kind: str, identifier: str, suffix: str | None = None) -> str:
        """The key of ``identifier`` (escaped: the rule every key of an id keeps) of ``kind``, or its ``suffix`` part."""
        key = f"{self.prefix}{kind}:{escape(identifier)}"
        return key if suffix is None else f"{key}:{suffix}"

    def thread(self, thread_id: str) -> str:
        """The thread's hash."""
        return self._of("thread", thread_id)

    def messages(self, thread_id: str) -> str:
        """The thread's history list."""
        return self._of("thread", thread_id, "messages")

    def thread_runs(self, thread_id: str) -> str:
        """The list of the thread's run ids."""
        return self._of("thread", thread_id, "runs")

    def lease(self, thread_id: str) -> str:
        """The thread's lease (:mod:`yao_actors.store.redis.leases`)."""
        return self._of("thread", thread_id, "lease")

    def run(self, run_id: str) -> str:
        """The run's hash."""
        return self._of("run", run_id)

    def events(self, run_id: str) -> str:
        """The run's event stream."""
        return self._of("run", run_id, "events")

    def parked(self, ticket: str) -> str:
        """A held call's hash (:mod:`yao_actors.store.redis.parked`); ``:answer`` and ``:outcome`` are its lists."""
        return self._of("parked", ticket)

    @property
    def threads(self) -> str:
        """The index of every thread."""
        return f"{self.prefix}threads"

    def owner_index(self, principal: str | None) -> str:
        """The index of the threads of ``principal`` (``None``: of the threads without an owner)."""
        return f"{self.prefix}threads:owner:" + ("~" if principal is None else f"={escape(principal)}")

    @property
    def running(self) -> str:
        """The set of the ids of runs still running."""
        return f"{self.prefix}runs:running"

    @property
    def oauth_tokens(self) -> str:
        """The hash of sealed OAuth tokens, a field ``escape(server):escape(identity)`` each
        (:mod:`yao_actors.store.protocol`)."""
        return f"{self.prefix}oauth:tokens"

    def oauth_expiry(self, server: str) -> str:
        """The sorted set of the fields of ``server``'s token records that expire, by when (POSIX time)."""
        return self._of("oauth:expiry", server)
