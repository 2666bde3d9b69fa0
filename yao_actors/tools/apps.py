"""MCP Apps (``io.modelcontextprotocol/ui``): which tools bring an interface, and what a run tells a client of one.

A tool declares its interface in ``_meta.ui.resourceUri`` (older servers: ``_meta["ui/resourceUri"]``), a
``ui://`` resource served as ``text/html;profile=mcp-app``; any other scheme is ignored (the tool is then a
plain tool). ``_meta.ui.visibility`` says who may call it: omitted, both the model and the app; ``["app"]``,
only its app (the model is never offered it); ``["model"]``, only the model. A malformed ``_meta.ui`` is ignored
the same way: a server's metadata is never a reason to fail.

When a call of a tool with an interface ends with the server's answer, the run emits, right after the call's
``TOOL_CALL_RESULT``, an AG-UI ``ACTIVITY_SNAPSHOT`` of type :data:`ACTIVITY_TYPE` whose content is what
``@ag-ui/mcp-apps-middleware`` puts there: the MCP result as the server sent it, the resource's URI, the
server's id and hash, and the call's arguments (:func:`activity_content`). The client renders the app from it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

import attrs
import mcp.types

from yao_actors.specs import HttpTransport, ServerSpec, SseTransport
from yao_actors.transports.session import APP_MIME_TYPE as APP_MIME_TYPE  # re-exported: what apps are
from yao_actors.transports.session import UI_EXTENSION as UI_EXTENSION
from yao_actors.untrusted import json as untrusted_json

#: The ``activityType`` of an app's ``ACTIVITY_SNAPSHOT`` (the middleware's ``MCPAppsActivityType``).
ACTIVITY_TYPE: Final = "mcp-apps"

MODEL: Final = "model"
APP: Final = "app"
_EVERYONE: Final = frozenset({MODEL, APP})


@attrs.frozen
class ToolInterface:
    """What a tool's ``_meta.ui`` says: its app's resource (``None``: no interface) and who may call it."""

    resource_uri: str | None = None
    visibility: frozenset[str] = _EVERYONE

    @property
    def for_model(self) -> bool:
        """Whether the model may be offered the tool."""
        return MODEL in self.visibility

    @property
    def for_app(self) -> bool:
        """Whether an app of its server may call the tool."""
        return APP in self.visibility


#: A tool that says nothing of an interface.
NO_INTERFACE: Final = ToolInterface()


def tool_interface(tool: mcp.types.Tool) -> ToolInterface:
    """What ``tool``'s ``_meta`` declares of an app (:data:`NO_INTERFACE` when nothing, or nothing usable)."""
    meta = tool.meta
    if not isinstance(meta, Mapping):
        return NO_INTERFACE
    ui = meta.get("ui")
    ui = ui if isinstance(ui, Mapping) else {}
    uri = ui.get("resourceUri", meta.get("ui/resourceUri"))
    resource_uri = uri if isinstance(uri, str) and is_app_uri(uri) else None
    visibility = ui.get("visibility")
    if isinstance(visibility, list) and visibility and all(isinstance(item, str) for item in visibility):
        seen = frozenset(visibility) & _EVERYONE
        return ToolInterface(resource_uri, seen)
    return NO_INTERFACE if resource_uri is None else ToolInterface(resource_uri)


def is_app_uri(uri: str) -> bool:
    """Whether ``uri`` names an app's resource (the ``ui://`` scheme, with something after it)."""
    return uri.startswith("ui://") and len(uri) > len("ui://")


def interfaces(tools: tuple[mcp.types.Tool, ...]) -> dict[str, ToolInterface]:
    """The tools of a catalog that say something of an app, by name."""
    return {tool.name: found for tool in tools if (found := tool_interface(tool)) is not NO_INTERFACE}


def server_hash(spec: ServerSpec) -> str:
    """The middleware's ``serverHash`` of a server: the MD5 of ``{"type", "url"}`` as JavaScript's
    ``JSON.stringify`` writes it. For a server reached by URL it is the middleware's own value for the same
    server; a server without a URL (stdio, in process) is hashed with ``yao-actors:`` and its id as its URL."""
    match spec.transport:
        case HttpTransport(url=url):
            kind = "http"
        case SseTransport(url=url):
            kind = "sse"
        case _:
            kind, url = "stdio", f"yao-actors:{spec.id}"
    text = json.dumps({"type": kind, "url": url}, ensure_ascii=False, separators=(",", ":"))
    return hashlib.md5(text.encode(), usedforsecurity=False).hexdigest()


@attrs.frozen
class AppCall:
    """A finished call of a tool with an interface: what its ``ACTIVITY_SNAPSHOT`` says."""

    resource_uri: str
    server_id: str
    server_hash: str
    tool_input: Mapping[str, Any]
    result: Mapping[str, Any]
    """The MCP ``CallToolResult`` as the server sent it (JSON-ready, by its wire names)."""


class _Entry(Protocol):
    """What :func:`app_call` reads of a catalog entry."""

    @property
    def interface(self) -> ToolInterface: ...


def app_call(
    entry: _Entry, spec: ServerSpec, arguments: Mapping[str, Any], app_result: Mapping[str, Any] | None
) -> AppCall | None:
    """The activity of a finished call: for a tool with an interface whose server answered (``app_result``, kept
    by the server actor), else ``None`` (no interface, ``apps`` off, or no answer: a timeout, a lost server)."""
    return interface_call(entry.interface, spec, arguments, app_result)


def interface_call(
    interface: ToolInterface, spec: ServerSpec, arguments: Mapping[str, Any], app_result: Mapping[str, Any] | None
) -> AppCall | None:
    """:func:`app_call` for a tool known by its ``interface`` (a stored task's tool, taken up in another process:
    :func:`listed_interface`)."""
    uri = interface.resource_uri
    if uri is None or app_result is None or not spec.apps:
        return None
    return AppCall(uri, spec.id, server_hash(spec), dict(arguments), app_result)


def listed_interface(tools: Sequence[mcp.types.Tool], name: str) -> ToolInterface:
    """The interface the tool ``name`` of a server's catalog (``tools``) declares; none when it is not listed."""
    for tool in tools:
        if tool.name == name:
            return tool_interface(tool)
    return NO_INTERFACE


def mcp_result(result: mcp.types.Result) -> dict[str, Any]:
    """An MCP result as it was on the wire (camelCase, only the fields the server set), with text made safe to
    encode."""
    dumped = result.model_dump(by_alias=True, exclude_unset=True, exclude_none=True, mode="json")
    scrubbed: dict[str, Any] = untrusted_json.scrub(dumped)
    return scrubbed


def activity_content(call: AppCall) -> dict[str, Any]:
    """The ``content`` of the call's ``ACTIVITY_SNAPSHOT``: the middleware's fields, in its order."""
    return {
        "result": dict(call.result),
        "resourceUri": call.resource_uri,
        "serverHash": call.server_hash,
        "serverId": call.server_id,
        "toolInput": dict(call.tool_input),
    }
