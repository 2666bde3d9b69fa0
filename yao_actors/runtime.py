"""The runtime: one nursery holding a supervised actor for every configured MCP server.

``async with open_runtime(config) as runtime:`` starts every server actor at
once (a stdio server takes about a second to start; they start side by side, and
one that fails to start is reported and retried without holding up the others),
exposes their handles as ``runtime.servers[id]``, and on exit stops them all: no
stdio child is left running, even when the body raised or was cancelled.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

import attrs
import trio

from yao_actors.config import Config, ServerSpec
from yao_actors.server_actor import ServerHandle, serve_mcp_server


@attrs.define(eq=False)
class Runtime:
    """A running configuration: its server handles and the models runs may use.

    ``models`` maps model ids to model objects given to ``open_runtime``
    (overriding or adding to ``config.models``). ``nursery`` is the runtime's
    own; conversations are opened inside it.
    """

    config: Config
    servers: Mapping[str, ServerHandle]
    models: Mapping[str, Any]
    nursery: trio.Nursery


@asynccontextmanager
async def open_runtime(config: Config, *, models: Mapping[str, Any] | None = None) -> AsyncIterator[Runtime]:
    """Start every server actor of ``config`` at once; stop them all when the block exits.

    An exception raised by the block comes out as itself, not wrapped in the
    nursery's exception group.
    """
    body_error: BaseException | None = None
    try:
        async with trio.open_nursery() as nursery:
            servers = await _start_servers(nursery, config.servers.values())
            try:
                yield Runtime(config=config, servers=servers, models=dict(models or {}), nursery=nursery)
            except BaseException as exc:
                body_error = exc
                raise
            finally:
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        if body_error is not None and list(group.exceptions) == [body_error]:
            raise body_error from None
        raise


async def _start_servers(nursery: trio.Nursery, specs: Iterable[ServerSpec]) -> dict[str, ServerHandle]:
    """Start one actor per spec, all at once, in ``nursery``; their handles by id, in config order."""
    started: dict[str, ServerHandle] = {}

    async def start(spec: ServerSpec) -> None:
        started[spec.id] = await nursery.start(serve_mcp_server, spec)

    ordered = list(specs)
    async with trio.open_nursery() as starters:
        for spec in ordered:
            starters.start_soon(start, spec)
    return {spec.id: started[spec.id] for spec in ordered}
