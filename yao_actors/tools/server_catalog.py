"""A server actor's catalog: read every page of ``tools/list``, publish it, and read it again when it changes.

The catalog is published on the actor's :class:`~yao_actors.tools.server_status.ServerStatus` (its handle reads
it). It is read again whenever the server announces ``tools/list_changed`` — as a notification on a handshake-era
connection, through a ``subscriptions/listen`` stream on a 2026-07-28 one. What of each tool's schemas is not
enforced is logged once per tool (:func:`~yao_actors.tools.schema_gate.tool_schema_notes`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import attrs
import mcp
import mcp.types
import trio
from mcp.shared.exceptions import MCPError

from yao_actors.tools.schema_gate import tool_schema_notes
from yao_actors.tools.server_calls import Connection
from yao_actors.tools.server_status import ServerStatus

logger = logging.getLogger(__name__)

#: Most ``tools/list`` pages read for one catalog (a server that pages forever cannot hang the actor).
MAX_CATALOG_PAGES = 1000


@attrs.define(eq=False)
class ServerCatalog:
    """The catalog side of one server actor (``server``: its id)."""

    server: str
    status: ServerStatus
    #: What is not enforced of each tool's schemas, by tool name, as last logged.
    schema_notes: dict[str, tuple[str, ...]] = attrs.field(factory=dict)

    async def fetch(self, client: mcp.Client) -> None:
        """Read the whole catalog (every page, at most :data:`MAX_CATALOG_PAGES`) and publish it."""
        tools: list[mcp.types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_CATALOG_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        self.status.set_catalog(tuple(tools))
        self._say_schema_notes(tools)

    def _say_schema_notes(self, tools: Sequence[mcp.types.Tool]) -> None:
        """Compile the tools' schemas now (through the gate, so a call finds them ready) and log, once per tool,
        what of them is not enforced (:func:`~yao_actors.tools.schema_gate.tool_schema_notes`)."""
        notes = {tool.name: found for tool in tools if (found := tool_schema_notes(tool))}
        for name, found in notes.items():
            if self.schema_notes.get(name) != found:
                logger.warning(
                    "server %r: tool %r: %s",
                    self.server,
                    name,
                    "; ".join(found),
                    extra={"server": self.server, "tool": name},
                )
        self.schema_notes = notes

    async def refresh(self, connection: Connection) -> None:
        """Fetch the catalog again whenever the server announces ``tools/list_changed``."""
        assert connection.client is not None
        while True:
            await connection.catalog_changed.wait()
            connection.catalog_changed = trio.Event()
            try:
                await self.fetch(connection.client)
            except MCPError as exc:
                logger.warning(
                    "server %r: refreshing the catalog failed: %s",
                    self.server,
                    exc.error.message,
                    extra={"server": self.server},
                )

    async def listen(self, connection: Connection) -> None:
        """On a stateless connection, ``tools/list_changed`` comes through a ``subscriptions/listen`` stream."""
        assert connection.client is not None
        try:
            async with connection.client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    connection.catalog_changed.set()
        except Exception as exc:  # a server without subscriptions still serves calls; its catalog stays as fetched
            logger.info(
                "server %r: no subscription to catalog changes: %s: %s",
                self.server,
                type(exc).__name__,
                exc,
                extra={"server": self.server},
            )
