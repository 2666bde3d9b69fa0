"""Resource links and embedded resources in tool results, as the model sees them.

A ``resource_link`` item becomes a short reference (``[link: Report <file:///r.txt>, text/plain, 1.2 KB]``:
name, uri, MIME type, size when given); an embedded text resource (the ``{"uri", "mimeType", "text"}`` that
:func:`~yao_actors.tools.results.parse_content` makes of it) its text; an embedded binary resource a
placeholder naming it, never its base64. The ``TOOL_CALL_RESULT`` event's content is what the model gets;
the items as the server sent them stay in the run's ``tool_results`` (``ToolCallResult.result``).
With ``mcpServers.<id>.read_links``, the server actor reads the linked text resources
(:func:`read_links`) before it answers the call, so the model gets their text.
"""

from __future__ import annotations

from typing import Any

import mcp
import mcp.types
import trio

from yao_actors.tools.budget import format_size
from yao_actors.untrusted import json as untrusted_json

MAX_READ_LINKS = 8
"""Links of one result read at most (``mcpServers.<id>.read_links``)."""

#: The keys of an embedded resource as ``parse_content`` gives it (its ``resource``).
_RESOURCE_KEYS = frozenset({"uri", "mimeType", "text", "blob", "_meta", "annotations", "name", "title", "size"})


def is_link(item: Any) -> bool:
    return isinstance(item, dict) and item.get("type") == "resource_link" and isinstance(item.get("uri"), str)


def is_embedded(item: Any) -> bool:
    """Whether ``item`` is an embedded resource's contents: a ``uri`` and either a ``text`` or a ``blob``."""
    if not isinstance(item, dict) or not isinstance(item.get("uri"), str) or not item.keys() <= _RESOURCE_KEYS:
        return False
    return isinstance(item.get("text"), str) != isinstance(item.get("blob"), str)


def link_reference(item: dict[str, Any]) -> str:
    """``[link: name <uri>, mime type, size]`` (the parts the link has)."""
    name = item.get("title") or item.get("name")
    parts = [f"{name} <{item['uri']}>" if isinstance(name, str) and name else f"<{item['uri']}>"]
    if isinstance(item.get("mimeType"), str):
        parts.append(item["mimeType"])
    if isinstance(item.get("size"), int) and not isinstance(item.get("size"), bool):
        parts.append(format_size(item["size"]))
    return f"[link: {', '.join(parts)}]"


def shown_resource(item: Any) -> Any:
    """What the model is shown of one content item: a link's reference, an embedded resource's text or a
    placeholder for its binary content, or the item itself."""
    if is_link(item):
        return link_reference(item)
    if is_embedded(item):
        if isinstance(item.get("text"), str):
            return item["text"]
        size = len(item["blob"]) * 3 // 4
        return f"[resource <{item['uri']}>, {item.get('mimeType') or 'binary'}, {format_size(size)}, not shown]"
    return item


def without_links(value: Any) -> Any:
    """``value`` (a parsed result) with its links and embedded resources as :func:`shown_resource` shows them."""
    if isinstance(value, list):
        if not any(is_link(item) or is_embedded(item) for item in value):
            return value
        return [shown_resource(item) for item in value]
    return shown_resource(value)


async def read_links(client: mcp.Client, value: Any, deadline: float) -> Any:
    """``value`` (a parsed result) with its first :data:`MAX_READ_LINKS` links to text resources replaced by
    what reading them gave (as embedded text resources), the reads ending by ``deadline``.

    A link that cannot be read (an error, binary contents, the deadline) stays a link: reading is a help to
    the model, never a reason for the call to fail.
    """
    items = value if isinstance(value, list) else [value]
    links = [index for index, item in enumerate(items) if is_link(item)][:MAX_READ_LINKS]
    if not links:
        return value
    read = list(items)
    with trio.move_on_at(deadline):
        for index in links:
            text = await _read_text(client, items[index]["uri"])
            if text is not None:
                read[index] = {"uri": items[index]["uri"], "mimeType": items[index].get("mimeType"), "text": text}
    return read if isinstance(value, list) else read[0]


async def _read_text(client: mcp.Client, uri: str) -> str | None:
    try:
        result = await client.read_resource(uri)
    except mcp.MCPError:
        return None
    texts = [item.text for item in result.contents if isinstance(item, mcp.types.TextResourceContents)]
    if not texts or len(texts) != len(result.contents):
        return None
    return untrusted_json.scrub_text("\n".join(texts))
