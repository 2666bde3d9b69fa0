"""How much of its conversations a runtime keeps in memory (issue 9: unbounded thread memory).

Two budgets, in bytes of message text:

- **per thread** (``max_thread_bytes``): when a run's messages join a thread's
  history and the history is over budget, its oldest whole *turns* are dropped
  from the in-memory copy. A turn starts at a ``user`` message and runs to the
  next one, so an assistant message with ``tool_calls`` always stays with the
  ``tool`` messages answering it (a history the model would refuse is never
  kept). A single turn larger than the budget is not kept at all: the next run
  on the thread starts without it.
- **all threads** (``max_threads_bytes``): while the histories together are over
  budget, the least recently used *idle* threads (no run in progress or waiting)
  are forgotten, oldest first.

Sizes are measured once per message, when it joins a history: the UTF-8 length
of every string in it (keys included) plus a small fixed cost per value. It is
an estimate of what the message costs, cheap to compute, and what the budgets
are compared with. A runtime whose store is the in-memory one keeps a run's
messages twice (the store's copy and the thread's, the same objects): the store
measures each (:func:`remember_bytes`) and the thread's history takes that
measure (:func:`taken_bytes`) instead of measuring again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attrs

MAX_THREAD_BYTES = 4 << 20
"""Default budget of one thread's history (4 MiB)."""

MAX_THREADS_BYTES = 256 << 20
"""Default budget of every thread's history together (256 MiB)."""

VALUE_OVERHEAD = 16
"""Bytes counted for every value of a message besides its text (keys, numbers, containers)."""


def message_bytes(message: Any) -> int:
    """The estimated size of one message (any JSON-like value), without recursion."""
    total = 0
    stack = [message]
    while stack:
        value = stack.pop()
        total += VALUE_OVERHEAD
        if isinstance(value, str):
            total += len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list | tuple):
            stack.extend(value)
    return total


REMEMBERED_SIZES = 4096
"""The most message sizes :func:`remember_bytes` keeps for :func:`taken_bytes` (the oldest go first): the
messages of a few hundred runs in flight (a run's are taken when it ends)."""

_remembered: dict[int, tuple[Any, int]] = {}
"""Sizes measured by :func:`remember_bytes` and not yet taken, by the message's ``id`` (with the message, so the
``id`` cannot be reused while it is here)."""


def remember_bytes(message: Any) -> int:
    """:func:`message_bytes` of ``message``, also kept for the next :func:`taken_bytes` of the same object.

    What a store calls for a message that is about to join a thread's history in memory too (the runtime's
    in-memory store and the thread's history hold the same message objects, and a recorded message never
    changes). At most :data:`REMEMBERED_SIZES` are kept: a size nobody takes is dropped, oldest first.
    """
    size = message_bytes(message)
    if len(_remembered) >= REMEMBERED_SIZES:
        del _remembered[next(iter(_remembered))]
    _remembered[id(message)] = (message, size)
    return size


def taken_bytes(message: Any) -> int:
    """The size :func:`remember_bytes` measured for this very object (forgotten then), or :func:`message_bytes`."""
    # An entry keeps its message alive, so its id is that object's while it is kept.
    entry = _remembered.pop(id(message), None)
    return message_bytes(message) if entry is None else entry[1]


def turn_starts(messages: Sequence[Any]) -> list[int]:
    """Where the turns of a history start: its beginning and every ``user`` message."""
    return [0, *(i for i, m in enumerate(messages) if i and isinstance(m, dict) and m.get("role") == "user")]


def keep_from(messages: Sequence[Any], sizes: Sequence[int], limit: int) -> int:
    """The first message to keep so the kept turns fit ``limit``: the newest whole turns that fit.

    ``len(messages)`` when not even the newest turn fits.
    """
    total = sum(sizes)
    starts = turn_starts(messages)
    for start, end in zip(starts, [*starts[1:], len(messages)], strict=True):
        if total <= limit:
            return start
        total -= sum(sizes[start:end])
    return len(messages)


@attrs.define
class BoundedHistory:
    """A thread's messages with their sizes, trimmed to ``limit`` bytes by whole turns as they grow."""

    limit: int = MAX_THREAD_BYTES
    messages: list[Any] = attrs.field(factory=list)
    sizes: list[int] = attrs.field(factory=list)
    bytes: int = 0

    def extend(self, new: Iterable[Any]) -> int:
        """Append ``new`` messages, then drop the oldest turns over budget; returns how many were dropped."""
        for message in new:
            size = taken_bytes(message)
            self.messages.append(message)
            self.sizes.append(size)
            self.bytes += size
        if self.bytes <= self.limit:
            return 0
        cut = keep_from(self.messages, self.sizes, self.limit)
        self.bytes -= sum(self.sizes[:cut])
        del self.messages[:cut], self.sizes[:cut]
        return cut

    def replace(self, messages: Iterable[Any]) -> int:
        """Make the history ``messages`` (an AG-UI client sends the whole conversation), trimmed as by :meth:`extend`."""
        self.messages, self.sizes, self.bytes = [], [], 0
        return self.extend(messages)


def idle_threads_to_forget(
    threads: Iterable[tuple[str, int, bool]], limit: int, *, total: int | None = None
) -> list[str]:
    """Which threads to forget so the histories fit ``limit``.

    ``threads`` are ``(thread id, history bytes, idle)``, least recently used
    first; only idle threads are forgotten, oldest first, and no more than
    needed. Busy threads count towards the total but stay. ``total``, when the
    caller keeps it, is the bytes of all of them: then ``threads`` is read only
    as far as needed (nothing at all within the budget).
    """
    if total is None:
        threads = list(threads)
        total = sum(size for _, size, _ in threads)
    forget: list[str] = []
    for thread_id, size, idle in threads:
        if total <= limit:
            break
        if idle:
            forget.append(thread_id)
            total -= size
    return forget
