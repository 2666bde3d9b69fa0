"""``mcpServers.<id>.module``: an MCP server written in Python, named as ``"package.module:attribute"``.

The attribute is an MCP SDK server (``mcp.server.mcpserver.MCPServer``, or a
low-level ``mcp.server.Server``) or a callable with no arguments that returns
one. :func:`resolve_module_server` imports the module and gets that server when
the configuration is read, so a reference that cannot work is a config error at
start (naming the import error), never a failed run later. A callable is called
once: the server it returns serves the whole life of the runtime, and a restart
opens a new session on it (its lifespan runs again).

Importing runs the module's code in this process: that is the point (no
subprocess, no serialization), and the reason to prefer a stdio server for code
that must be isolated. One side effect is undone: building an ``MCPServer``
calls ``logging.basicConfig(level=INFO)`` in the SDK, which would turn on every
INFO record of the process (the runtime's per-run records, the HTTP clients')
for an application that had not configured logging; the root logger is left as
it was (:func:`keeping_root_logging`).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import logging
import re
from collections.abc import Iterator
from typing import Any

from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer

from yao_actors.config.values import ValueReader, join_path
from yao_actors.specs import InMemoryTransport

_REFERENCE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_EXPECTED = "an MCPServer (mcp.server.mcpserver) or a low-level mcp.server.Server"


class ModuleServerError(Exception):
    """Why a ``module`` reference gives no server; the message names the reference and the cause."""


def resolve_module_server(reference: str) -> MCPServer | Server[Any]:
    """The server ``"package.module:attribute"`` names; :class:`ModuleServerError` saying why not.

    The attribute path may be dotted (``"tools:registry.server"``). An import
    error of any kind (a missing module, a syntax error, an exception or
    ``sys.exit`` at import) is reported with its type and message.
    """
    if not _REFERENCE.fullmatch(reference):
        raise ModuleServerError(f'expected "package.module:attribute", got {reference!r}')
    module_name, _, attribute = reference.partition(":")
    with keeping_root_logging():
        return _resolve(reference, module_name, attribute)


@contextlib.contextmanager
def keeping_root_logging() -> Iterator[None]:
    """Leave the root logger's handlers and level as they were before the block (the MCP SDK's ``MCPServer``
    configures logging when built: ``logging.basicConfig(level=INFO)`` with a handler of its own)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        if root.handlers != handlers or root.level != level:
            for handler in [h for h in root.handlers if h not in handlers]:
                root.removeHandler(handler)
                handler.close()
            for handler in handlers:
                if handler not in root.handlers:
                    root.addHandler(handler)
            root.setLevel(level)


def _resolve(reference: str, module_name: str, attribute: str) -> MCPServer | Server[Any]:
    try:
        target: Any = importlib.import_module(module_name)
    except (Exception, SystemExit) as error:
        raise ModuleServerError(
            f"cannot import {module_name!r}: {_describe(error)}{_hint(error, module_name)}"
        ) from None
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise ModuleServerError(f"{reference}: module {module_name!r} has no attribute {attribute!r}") from None
    return _server_of(reference, target)


def _server_of(reference: str, target: Any) -> MCPServer | Server[Any]:
    if isinstance(target, MCPServer | Server):
        return target
    if not callable(target):
        raise ModuleServerError(
            f"{reference} is {_a(target)}; expected {_EXPECTED}, or a callable with no arguments returning one"
        )
    if inspect.iscoroutinefunction(target):
        raise ModuleServerError(f"{reference} is an async function; give a plain function that returns the server")
    try:
        server = target()
    except Exception as error:
        raise ModuleServerError(f"calling {reference}() raised {_describe(error)}") from None
    if not isinstance(server, MCPServer | Server):
        raise ModuleServerError(f"{reference}() returned {_a(server)}; expected {_EXPECTED}")
    return server


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _hint(error: BaseException, module_name: str) -> str:
    """Where Python looked, when the module itself (not one it imports) was not found."""
    if isinstance(error, ModuleNotFoundError) and error.name and f"{module_name}.".startswith(f"{error.name}."):
        return " (put its directory on PYTHONPATH; `yao-actors serve` also looks in the current directory)"
    return ""


def _a(value: Any) -> str:
    name = type(value).__name__
    return f"an {name}" if name[:1].lower() in "aeiou" else f"a {name}"


def read_module_transport(reader: ValueReader, item: dict[str, Any], path: str) -> InMemoryTransport | None:
    """The transport of a server entry with a ``module``; problems go to ``reader``, each naming its key path."""
    for key in ("args", "env", "cwd", "headers"):
        if key in item:
            reader.fail(join_path(path, key), "not for in-process servers (this server has a 'module')")
    if item.get("type", "module") != "module":
        reader.fail(join_path(path, "type"), f"{item['type']!r} does not take a 'module'")
    reference = reader.string(item["module"], join_path(path, "module"))
    if reference is None:
        return None
    try:
        server = resolve_module_server(reference)
    except ModuleServerError as error:
        reader.fail(join_path(path, "module"), str(error))
        return None
    return InMemoryTransport(server, reference)
