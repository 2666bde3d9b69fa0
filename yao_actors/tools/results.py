"""Values describing what happened to a tool call, and how results are shown to a model.

``ToolOutcome`` is what a server actor returns for one ``tools/call``;
``ToolCallResult`` is what dispatch returns for one of a model's tool calls (the
outcome plus the call's identity). ``parse_content`` applies the seed's
``ParsedContent`` rules (text parsed as JSON where it is, a single item unwrapped), ``call_outcome`` adds the rules of
structured output (a tool with an ``outputSchema``), and ``tool_message_content`` renders
a result the way the model receives it (compact JSON in the tool's key order, or ``Error: ...``; images and audio as
placeholders, :mod:`yao_actors.tools.media`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import mcp.types

from yao_actors.errors import ErrorKind, is_retryable
from yao_actors.tools.apps import AppCall
from yao_actors.tools.links import without_links
from yao_actors.tools.media import without_media
from yao_actors.tools.schema_gate import schema_problems
from yao_actors.tools.task_state import TaskState
from yao_actors.tools.tool_call import ToolCall
from yao_actors.untrusted import json as untrusted_json
from yao_actors.untrusted.json import compact_json as compact_json  # where events and tools find it


@attrs.frozen
class ToolOutcome:
    """The outcome of one ``tools/call`` through a server actor.

    ``result`` is the parsed content (also set for ``isError`` results, as Yao
    does); ``error`` is the error text or ``None``; ``kind`` the error kind or
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
    structured: bool = False
    """``result`` is the tool's ``structuredContent``, valid against its ``outputSchema``."""
    connection_lost: bool = False
    """The call failed because the connection to its server was lost under it (it may or may not have run)."""
    rich: bool = False
    """The content had blocks other than text (images, audio, links, resources): only then does
    :func:`tool_message_content` look for them in ``result``."""
    task: TaskState | None = None
    """The server answered with a task, or about one (:mod:`~yao_actors.tools.task_state`): the task as it is
    now. A call's final outcome has none."""
    app_result: Mapping[str, Any] | None = None
    """The MCP result as the server sent it (JSON-ready), kept for an app: set for a tool with an interface of a
    server whose ``apps`` is on, and for what an app asked (:mod:`yao_actors.tools.apps`)."""

    @property
    def ok(self) -> bool:
        return self.kind is None

    @property
    def retryable(self) -> bool:
        return self.kind is not None and is_retryable(self.kind, self.error or "")  # a success never is


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
    structured: bool = False
    title: str = ""
    """The tool's title, for people (``title`` of the tool or of its annotations)."""
    rich: bool = False
    """The content had blocks other than text (images, audio, links, resources): see :class:`ToolOutcome`."""
    reconnected: bool = False
    """The call was run again, once, on the server's new connection after the first was lost under it."""
    app: AppCall | None = None
    """For a tool with an interface: what its ``ACTIVITY_SNAPSHOT`` says (:mod:`yao_actors.tools.apps`)."""

    @property
    def ok(self) -> bool:
        return self.kind is None

    @classmethod
    def of(
        cls,
        call: ToolCall,
        server: str,
        tool: str,
        outcome: ToolOutcome,
        *,
        title: str = "",
        app: AppCall | None = None,
        repaired: bool = False,
        sequential_retry: bool = False,
        reconnected: bool = False,
    ) -> ToolCallResult:
        """The result of the model's ``call`` that server ``server`` answered with ``outcome`` (tool ``tool``):
        whatever the call and the outcome say, and what happened on the way (the rest, as the fields say)."""
        return cls(
            call_id=call.id,
            name=call.name,
            server=server,
            tool=tool,
            arguments=call.arguments,
            result=outcome.result,
            error=outcome.error,
            kind=outcome.kind,
            retryable=outcome.retryable,
            duration=outcome.duration,
            repaired=repaired,
            sequential_retry=sequential_retry,
            structured=outcome.structured,
            title=title,
            reconnected=reconnected,
            rich=outcome.rich,
            app=app,
        )


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


def call_outcome(
    result: mcp.types.CallToolResult, output_schema: Mapping[str, Any] | None, duration: float
) -> ToolOutcome:
    """What a ``tools/call`` answered, as an outcome: the ``ParsedContent`` of its content; or, for a tool
    declaring an ``outputSchema``, its ``structuredContent`` once (not again as the text that repeats it),
    after any other blocks (images, links), or a ``tool_error`` saying where it breaks the schema."""
    rich = any(not isinstance(block, mcp.types.TextContent) for block in result.content)
    if result.is_error:
        text = "\n".join(block.text for block in result.content if isinstance(block, mcp.types.TextContent))
        parsed = parse_content(result.content)
        return ToolOutcome(result=parsed, error=text or "tool error", kind=ErrorKind.TOOL_ERROR, duration=duration)
    if output_schema is None:
        return ToolOutcome(result=parse_content(result.content), duration=duration, rich=rich)
    structured = result.structured_content
    problem: str | None = None
    if structured is None:
        problem = "the tool declares an outputSchema but returned no structuredContent"
    elif problems := schema_problems(structured, output_schema):
        problem = "the tool's structuredContent does not match its outputSchema: " + "; ".join(problems)
    if problem is not None:
        return ToolOutcome(error=problem, kind=ErrorKind.TOOL_ERROR, duration=duration)
    others = [block for block in result.content if not isinstance(block, mcp.types.TextContent)]
    value = untrusted_json.scrub(_unwrapped(structured, output_schema))
    if others:
        rest = parse_content(others)
        value = [value, *(rest if len(others) > 1 else [rest])]
    return ToolOutcome(result=value, duration=duration, structured=True, rich=rich)


def _unwrapped(structured: Any, output_schema: Mapping[str, Any]) -> Any:
    """The value of ``{"result": value}`` when the schema has ``result`` as its one, required, property: how the
    MCP SDKs give a tool's return that is not an object (a string, a number, a list) as structured output."""
    properties = output_schema.get("properties")
    wrapped = isinstance(properties, Mapping) and list(properties) == ["result"]
    wrapped = wrapped and output_schema.get("required") == ["result"]
    if wrapped and isinstance(structured, dict) and list(structured) == ["result"]:
        return structured["result"]
    return structured


def tool_message_content(result: ToolCallResult, sent: int = 0) -> str:
    """The content of the ``role: tool`` message a model gets for ``result`` (always encodable as UTF-8): images
    and audio as placeholders, the first ``sent`` of them saying they are sent below (:mod:`.media`); resource
    links as short references and embedded resources as their text (:mod:`.links`)."""
    if result.error is not None:
        return f"Error: {untrusted_json.scrub_text(result.error)}"
    if not result.rich:  # text only: a JSON text that looks like an image or a link is the tool's data
        return compact_json(result.result)
    return compact_json(without_links(without_media(result.result, sent)))
