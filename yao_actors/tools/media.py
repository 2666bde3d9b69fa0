"""Images and audio in tool results: never base64 in a tool message.

A result's image and audio items (``{"type": "image" | "audio", "data",
"mimeType"}`` after :func:`~yao_actors.tools.results.parse_content`) reach the
model as a placeholder (``[image image/png, 48 KB]``, or ``..., sent below]``
when the image is sent). A model that takes images (``max_images`` > 0: a model
marked ``"vision": true``) gets up to that many images of a turn in one ``user``
message after the tool messages (Chat Completions takes images only there).
Clients get the data in the ``TOOL_CALL_RESULT`` event's ``metadata.media``,
up to a size; past it an item is described by its type, MIME type and size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from yao_actors.tools.budget import format_size

MEDIA_TYPES = frozenset({"image", "audio"})
"""The content types a tool message shows as a placeholder."""

SENT_BELOW = "sent below"


def is_media(item: Any) -> bool:
    """Whether ``item`` (a parsed content item) is an image or audio clip with its base64 data."""
    return isinstance(item, dict) and item.get("type") in MEDIA_TYPES and isinstance(item.get("data"), str)


def media_items(value: Any) -> list[dict[str, Any]]:
    """The image and audio items of a parsed result (the result itself, or the items of a list)."""
    if is_media(value):
        return [value]
    if isinstance(value, list):
        return [item for item in value if is_media(item)]
    return []


def data_size(item: dict[str, Any]) -> int:
    """The bytes the base64 ``data`` of ``item`` decodes to (without decoding it)."""
    data: str = item["data"].rstrip()
    return len(data) * 3 // 4 - len(data) + len(data.rstrip("="))


def placeholder(item: dict[str, Any], note: str | None = None) -> str:
    """What a tool message shows for ``item``: ``[image image/png, 48 KB]`` and ``note`` if any."""
    described = f"{item['type']} {item.get('mimeType') or 'unknown type'}, {format_size(data_size(item))}"
    return f"[{described}, {note}]" if note else f"[{described}]"


def without_media(value: Any, sent: int = 0) -> Any:
    """``value`` with its image and audio items as placeholders; the first ``sent`` of them say ``sent below``."""
    if is_media(value):
        return placeholder(value, SENT_BELOW if sent else None)
    if not isinstance(value, list) or not any(is_media(item) for item in value):
        return value
    shown: list[Any] = []
    for item in value:
        if is_media(item):
            shown.append(placeholder(item, SENT_BELOW if sent > 0 else None))
            sent -= 1
        else:
            shown.append(item)
    return shown


def images_to_send(results: Sequence[Any], limit: int) -> list[int]:
    """How many images of each result (``ToolCallResult``-like, in call order) a model taking ``limit`` images
    a turn is sent: the first ones, in call order. Failed results send none."""
    counts: list[int] = []
    left = limit
    for result in results:
        images = _image_count(result.result) if result.error is None and result.rich else 0
        take = min(images, left)
        counts.append(take)
        left -= take
    return counts


def _image_count(value: Any) -> int:
    """The leading image items of a result that can be sent (audio is never sent, and stops the count)."""
    count = 0
    for item in media_items(value):
        if item["type"] != "image":
            break
        count += 1
    return count


def image_message(results: Sequence[Any], counts: Sequence[int]) -> dict[str, Any]:
    """The ``user`` message carrying the images :func:`images_to_send` chose, each after a line naming its call."""
    parts: list[dict[str, Any]] = [{"type": "text", "text": "The images the tool calls above returned:"}]
    for result, count in zip(results, counts, strict=True):
        for item in media_items(result.result)[:count]:
            parts.append({"type": "text", "text": f"{placeholder(item)} from call {result.call_id}"})
            url = f"data:{item.get('mimeType') or 'image/png'};base64,{item['data']}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return {"role": "user", "content": parts}


def event_media(value: Any, max_bytes: int) -> list[dict[str, Any]]:
    """A result's image and audio items for a ``TOOL_CALL_RESULT`` event: with their data while the data so far
    stays within ``max_bytes``, else described by ``size`` (bytes) only."""
    items: list[dict[str, Any]] = []
    total = 0
    for item in media_items(value):
        described = {"type": item["type"], "mimeType": item.get("mimeType")}
        total += len(item["data"])
        if total <= max_bytes:
            items.append({**described, "data": item["data"]})
        else:
            items.append({**described, "size": data_size(item)})
    return items
