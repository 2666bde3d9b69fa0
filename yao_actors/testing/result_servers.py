"""An MCP server whose tools return what a model finds hard to take: large results, images, audio, structured output.

``build_result_server()`` returns a fresh ``MCPServer``; ``python -m
yao_actors.testing.result_servers`` serves the same tools over stdio.

Tools: ``blob`` (``size`` characters of JSON records or of lines), ``picture``
(a PNG image and a caption), ``sound`` (a WAV clip), ``forecast`` (structured
output matching its ``outputSchema``), ``bad_forecast`` (structured output that
does not match the ``outputSchema`` it declares), annotated tools
(``lookup``: read-only, with a title; ``erase``: destructive, with a title; ``note``: ``destructiveHint: false``),
and ``flaky_read`` (read-only) / ``flaky_write`` (destructive), whose first call exits the process mid-call
(leaving a file at ``marker``), and whose next ones answer.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import pathlib
from typing import Any, TypedDict

from mcp.server.mcpserver import MCPServer
from mcp.types import AudioContent, CallToolResult, ImageContent, TextContent, ToolAnnotations

from yao_actors.config.module_servers import keeping_root_logging

#: A 1×1 transparent PNG.
TINY_PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000100e5270ede0000000049454e44ae426082"
    )
).decode()

#: The ``outputSchema`` ``bad_forecast`` declares (and does not keep to).
FORECAST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp": {"type": "number"}},
    "required": ["city", "temp"],
}


class Forecast(TypedDict):
    """What ``forecast`` returns (its ``outputSchema``)."""

    city: str
    temp: float


def blob_text(size: int, shape: str) -> str:
    """About ``size`` characters: a JSON list of records (``json``) or numbered lines (``lines``)."""
    if shape == "lines":
        lines: list[str] = []
        total = 0
        while total < size:
            line = f"line {len(lines)}: the quick brown fox jumps over the lazy dog"
            lines.append(line)
            total += len(line) + 1
        return "\n".join(lines)
    records: list[str] = []
    total = 2
    while total < size:
        record = json.dumps({"id": len(records), "name": f"item {len(records)}", "tags": ["a", "b"]})
        records.append(record)
        total += len(record) + 1
    return "[" + ",".join(records) + "]"


def build_result_server(name: str = "results") -> MCPServer:
    """A fresh server named ``name`` with the tools above (building it leaves logging as it was)."""
    with keeping_root_logging():
        server = MCPServer(name)

    @server.tool(description="About `size` characters of JSON records (shape 'json') or of lines (shape 'lines').")
    async def blob(size: int, shape: str = "json") -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=blob_text(size, shape))])

    @server.tool(description="A tiny PNG image and its caption.")
    async def picture() -> CallToolResult:
        image = ImageContent(type="image", data=TINY_PNG, mime_type="image/png")
        return CallToolResult(content=[TextContent(type="text", text="a tiny picture"), image])

    @server.tool(description="A short WAV clip.")
    async def sound() -> CallToolResult:
        data = base64.b64encode(b"RIFF" + bytes(60)).decode()
        return CallToolResult(content=[AudioContent(type="audio", data=data, mime_type="audio/wav")])

    @server.tool(description="The forecast of a city, as structured output.")
    async def forecast(city: str) -> Forecast:
        return {"city": city, "temp": 3.5}

    @server.tool(description="A forecast whose structured output breaks its own outputSchema.", structured_output=False)
    async def bad_forecast(city: str) -> CallToolResult:
        structured = {"city": city, "temp": "warm"}
        text = TextContent(type="text", text=json.dumps(structured))
        return CallToolResult(content=[text], structured_content=structured)

    server._tool_manager.get_tool("bad_forecast").fn_metadata.output_schema = FORECAST_SCHEMA  # type: ignore[union-attr]
    _add_annotated_tools(server)
    return server


def _add_annotated_tools(server: MCPServer) -> None:
    @server.tool(title="Look up a record", annotations=ToolAnnotations(read_only_hint=True))
    async def lookup(key: str) -> str:
        return f"record {key}"

    @server.tool(title="Erase a record", annotations=ToolAnnotations(destructive_hint=True))
    async def erase(key: str) -> str:
        return f"erased {key}"

    @server.tool(annotations=ToolAnnotations(destructive_hint=False))
    async def note(text: str) -> str:
        return f"noted {text}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def flaky_read(marker: str) -> str:
        return _first_call_exits(marker, "read")

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    async def flaky_write(marker: str) -> str:
        return _first_call_exits(marker, "written")


def _first_call_exits(marker: str, done: str) -> str:
    """The first call (no file at ``marker`` yet) creates the file and exits the process mid-call."""
    path = pathlib.Path(marker)
    if not path.exists():
        path.write_text("called once")
        os._exit(1)
    return done


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="results")
    args = parser.parse_args(argv)
    build_result_server(args.name).run()


if __name__ == "__main__":
    main()
