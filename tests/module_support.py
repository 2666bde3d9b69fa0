"""Temporary Python modules for the tests of ``mcpServers.<id>.module``: written, importable, forgotten after."""

from __future__ import annotations

import importlib
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import attrs
import pytest

#: The server ``mine`` with the two tools every ``module:`` test uses (the start of each tools module).
COMMON_TOOLS = """
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("mine")


    @server.tool(description="Shout the text back.")
    def shout(text: str) -> str:
        return text.upper() + "!"


    @server.tool()
    def explode(reason: str) -> str:
        raise RuntimeError(reason)
"""

#: An in-process server with the tools the tests of ``module:`` need.
TOOLS_MODULE = (
    COMMON_TOOLS
    + """
    import sys
    import threading

    from mcp.server.mcpserver.exceptions import ToolError

    released = threading.Event()


    @server.tool()
    def refuse(reason: str) -> str:
        raise ToolError(reason)


    @server.tool()
    def block() -> dict:
        # Synchronous and blocking: it returns once the test sets `released` (or gives up after 10 s).
        return {"released": released.wait(10)}


    @server.tool()
    async def ping() -> str:
        return "pong"


    @server.tool()
    def leave(code: int) -> str:
        sys.exit(code)
"""
)


@attrs.define
class ModuleWriter:
    """Writes modules under ``directory`` (which is on ``sys.path``), each under a fresh name."""

    directory: Path
    written: list[str] = attrs.field(factory=list)

    def __call__(self, source: str, *, prefix: str = "tools") -> str:
        """Write ``source`` as a new module; returns its name."""
        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        (self.directory / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
        importlib.invalidate_caches()
        self.written.append(name)
        return name

    def module(self, name: str) -> ModuleType:
        """The imported module ``name`` (the config loader imported it)."""
        return sys.modules[name]


def module_writer(directory: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleWriter]:
    """For a test's fixture: a :class:`ModuleWriter` over ``directory``, put on ``sys.path`` for the test."""
    monkeypatch.syspath_prepend(str(directory))
    writer = ModuleWriter(directory)
    yield writer
    for name in writer.written:
        sys.modules.pop(name, None)
