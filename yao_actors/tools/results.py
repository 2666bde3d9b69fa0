"""Values describing what happened to a tool call, and how results are shown to a model.

``ToolOutcome`` is what a server actor returns for one ``tools/call``;
``ToolCallResult`` is what dispatch returns for one of a model's tool calls (the
outcome plus the call's identity). ``parse_content`` applies the seed's
``ParsedContent`` rules (reference spec §8.1) and ``tool_message_content`` renders
a result the way the model receives it (DESIGN §4.2; images and audio as
placeholders, :mod:`yao_actors.tools.media`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs
import mcp.types

from yao_actors import untrusted_json
from yao_actors.errors import ErrorKind, is_retryable
from yao_actors.tools.media import without_media


@attrs.frozen
class ToolOutcome:
    """The outcome of one ``tools/call`` through a server actor.

    ``result`` is the parsed content (also set for ``isError`` results, as in the
    seed); ``error`` is the error text or ``None``; ``kind`` the error kind or
    ``None`` on success; ``duration`` seconds from the request to the answer.
    ``stderr_tail`` is the last stderr of a stdio server that died, for the
    embedding program only: ``error`` (what the model and clients see) carries
    it only when the server's ``expose_stderr`` is set.
    """

    result: Any = None
    error: str | None = None
    kind: ErrorKind | None = None
    duration: float = 0.0
    stderr_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.kind is None

    @property
    def retryable(self) -> bool:
        return is_retryable(self.kind, self.error or "")


@attrs.frozen
class ToolCallResult:
    """The result of one tool call a model asked for.

    ``arguments`` is the raw argument string the model sent; ``server`` and
    ``tool`` are empty when the name could not be resolved. ``repaired`` says the
    arguments were not strict JSON and were repaired; ``sequential_retry`` says
    the call was run a second time, alone, after a retryable failure.
    """

    call_id: str
    name: str
    server: str
    tool: str
    arguments: str
    result: Any = None
    error: str | None = None
    kind: ErrorKind | None = None
    retryable: bool = False
    duration: float = 0.0
    repaired: bool = False
    sequential_retry: bool = False

    @property
    def ok(self) -> bool:
        return self.kind is None


#: What a JSON text can start with after whitespace (``NaN`` and ``Infinity`` too, as ``json.loads`` reads them).
_JSON_STARTS = frozenset('{["-0123456789tfnNI')


def _try_json(text: str) -> Any:
    """The JSON value of a text block, or the text itself (lone surrogates replaced either way).

    JSON that cannot be used (malformed, nested too deep, too many digits) is
    just text: a tool's result is never a reason to fail.
    """
    if text.lstrip(" \t\n\r")[:1] not in _JSON_STARTS:
        return untrusted_json.scrub_text(text)  # plain text for sure: spares the cost of a failed parse
    try:
        return untrusted_json.loads(text)
    except ValueError:
        return untrusted_json.scrub_text(text)


def parse_content(blocks: Sequence[Any]) -> Any:
    """Apply the seed's ``ParsedContent`` rules to MCP content blocks.

    Text blocks are parsed as JSON where possible, images become
    ``{"type", "data", "mimeType"}``, embedded resources their resource, other
    blocks their whole dict; a single item is unwrapped and no item gives ``None``.
    Strings in the result are always encodable as UTF-8 (lone surrogates become
    U+FFFD), and text nested too deep to be used as JSON stays text.
    ``blocks`` may hold MCP pydantic content models or plain dicts.
    """
    items: list[Any] = []
    for block in blocks:
        if isinstance(block, mcp.types.TextContent):  # the common case, without a model_dump
            data: dict[str, Any] = {"type": "text", "text": block.text}
        else:
            data = block if isinstance(block, dict) else block.model_dump(by_alias=True, exclude_none=True)
        kind = data.get("type")
        if kind == "text":
            text = data.get("text")
            if isinstance(text, str) and text != "":
                items.append(_try_json(text))
        elif kind == "image":
            items.append(
                untrusted_json.scrub({"type": "image", "data": data.get("data"), "mimeType": data.get("mimeType")})
            )
        elif kind == "resource":
            items.append(untrusted_json.scrub(data.get("resource")))
        else:
            items.append(untrusted_json.scrub(data))
    if not items:
        return None
    return items[0] if len(items) == 1 else items


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def compact_json(value: Any) -> str:
    """Compact JSON with key order preserved, non-ASCII kept, and no HTML escaping."""
    return _COMPACT.encode(value)  # one encoder made once: ``json.dumps`` with options builds one per call


def tool_message_content(result: ToolCallResult, sent: int = 0) -> str:
    """The content of the ``role: tool`` message a model gets for ``result`` (always encodable as UTF-8): images
    and audio as placeholders, the first ``sent`` of them saying they are sent below (:mod:`.media`)."""
    if result.error is not None:
        return f"Error: {untrusted_json.scrub_text(result.error)}"
    return compact_json(without_media(result.result, sent))
