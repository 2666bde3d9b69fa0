"""The one nursery shape the runtime's owners use: the body's exception comes out as itself.

Trio wraps whatever leaves a nursery in an exception group; a caller of
``open_runtime`` or ``open_conversations`` wants the exception its own block
raised, not a tree of groups around it. Everything else (a task of the nursery
failing) still comes out as the group it is.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from yao_actors.errors import exception_leaves


@asynccontextmanager
async def open_owned_nursery() -> AsyncIterator[trio.Nursery]:
    """A nursery that is cancelled when the block ends, and lets the block's own exception out unwrapped."""
    body_error: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            try:
                yield nursery
            except BaseException as exc:
                body_error = exc
                raise
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        if body_error is not None and exception_leaves(group) == [body_error]:
            raise body_error from None
        raise
