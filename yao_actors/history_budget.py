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
are compared with. A run's messages are measured once, as they are written
to the store (by the memory store, which returns the sizes it measured for its
own budget, or else by the run's journal), and the thread's history takes
those sizes (:meth:`BoundedHistory.extend` with ``sizes``) instead of
measuring again. No size is kept anywhere else: nothing here holds a message.
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

    def extend(self, new: Iterable[Any], sizes: Iterable[int] | None = None) -> int:
        """Append ``new`` messages, then drop the oldest turns over budget; returns how many were dropped.

        ``sizes``: their :func:`message_bytes`, when the caller measured them already (one for each).
        """
        messages = list(new)
        measured = list(map(message_bytes, messages) if sizes is None else sizes)
        if len(measured) != len(messages):
            raise ValueError(f"{len(messages)} messages with {len(measured)} sizes")
        self.messages.extend(messages)
        self.sizes.extend(measured)
        self.bytes += sum(measured)
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
