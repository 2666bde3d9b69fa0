"""A stdio MCP server that writes one line to ``$COUNT_FILE`` per execution, so a test can count real calls.

Run as ``python counting_server.py``; tools ``sleep(seconds)`` and ``fail(message)``
(an ``isError`` result). Every process started from one config appends to the same file.
"""

from __future__ import annotations

import os
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer

from yao_actors.testing.servers import tool_error

server = MCPServer("counting")


def _count(tool: str) -> None:
    with open(os.environ["COUNT_FILE"], "a", encoding="utf-8") as file:
        file.write(f"{tool}\n")


@server.tool(description="Sleep for the given seconds, then return {'slept': seconds}.")
async def sleep(seconds: float) -> dict[str, Any]:
    _count("sleep")
    await anyio.sleep(seconds)
    return {"slept": seconds}


@server.tool(description="Fail with exactly the given message (an isError result).")
async def fail(message: str) -> Any:
    _count("fail")
    return tool_error(message)


if __name__ == "__main__":
    server.run()
