"""The direct model: an offline stand-in that does only what the user says, to try servers without a language
model (``"model": "direct"`` in an assistant, or with :func:`~yao_actors.open_runtime`).

Each line of the user's message is one tool call, all of them in one parallel batch::

    call time.get_current_time timezone=UTC
    time.convert_time source_timezone=UTC time=12:00 target_timezone="Asia/Tokyo"
    everything.echo {"message": "hi"}
    {"tool": "time.get_current_time", "arguments": {"timezone": "UTC"}}

A tool is named ``server.tool`` (the server's id and the tool's MCP name) or by the flat ``server__tool`` name the
model sees; ``call`` in front is optional. Arguments are ``key=value`` words (a value is read as JSON when it is
JSON — ``n=3``, ``flag=true``, ``tags='["a","b"]'`` — else kept as text; quote a value with spaces as in a shell) or
one JSON object. A whole line may be a JSON object with ``tool`` and ``arguments`` (so a JSONL script of calls is a
message too). ``tools`` or ``help`` lists what can be called. A line it cannot read, or a tool not offered, is
answered in text and nothing is called: the message is all or nothing. Once the calls are answered, the model
answers with their results, one line each.

The calls go through everything a language model's calls go through (argument checks, approvals, the servers'
questions): it chooses the calls, nothing more. A client choosing calls is no more than a user telling a
language model what to call.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any, Final

import attrs

from yao_actors.models.base import Completion, ToolCall
from yao_actors.models.offline import KEPT_CALLS, FunctionModel, compact_args, last_user_text, results_since_user
from yao_actors.tools.naming import flat_tool_name
from yao_actors.untrusted import json as untrusted_json

#: What the model says of its grammar when asked (``help``) or when a line cannot be read.
GRAMMAR: Final = (
    "Write one tool call a line: `call server.tool key=value ...` (values are JSON when they parse, else text; "
    'quote values with spaces), `server.tool {"key": "value"}`, or `{"tool": "server.tool", "arguments": {...}}`. '
    "`tools` lists the tools."
)


class DirectError(ValueError):
    """A line of the user's message that names no offered tool or whose arguments cannot be read."""


@attrs.frozen
class _Tool:
    flat: str
    description: str


class DirectModel(FunctionModel):
    """Calls exactly the tools the user's message names, with exactly its arguments (see the module docstring)."""

    def __init__(self, *, chunk_size: int | None = None, keep_calls: int | None = KEPT_CALLS) -> None:
        super().__init__(
            self._answer, name="direct (offline: calls what you write)", chunk_size=chunk_size, keep_calls=keep_calls
        )

    def _answer(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        results = results_since_user(messages)
        if results:
            return Completion(text="\n".join(f"{name}: {content}" for name, content in results.items()))
        text = last_user_text(messages).strip()
        offered = _offered(tools)
        if text.lower() in ("", "help", "tools", "/tools"):
            return Completion(text=tools_text(offered))
        try:
            calls = [parse_call(line, offered) for line in text.splitlines() if line.strip()]
        except DirectError as error:
            return Completion(text=f"{error}\n{GRAMMAR}")
        turn = self.call_count
        return Completion(
            tool_calls=tuple(
                ToolCall(id=f"call_direct_{turn}_{i}", name=name, arguments=compact_args(arguments))
                for i, (name, arguments) in enumerate(calls)
            ),
            finish_reason="tool_calls",
        )


def _offered(tools: Sequence[Mapping[str, Any]]) -> dict[str, _Tool]:
    """The offered tools by flat name."""
    found: dict[str, _Tool] = {}
    for tool in tools:
        function = tool.get("function") or {}
        name = str(function.get("name", ""))
        found[name] = _Tool(name, str(function.get("description") or "").strip())
    return found


def tools_text(offered: Mapping[str, _Tool]) -> str:
    """The tools that can be called, one a line, and the grammar."""
    if not offered:
        return "No tools are offered to this assistant (its mcp.servers), so there is nothing to call."
    lines = [
        f"- {_dotted(name)}: {tool.description.splitlines()[0] if tool.description else ''}".rstrip(": ")
        for name, tool in offered.items()
    ]
    return "Tools:\n" + "\n".join(lines) + "\n" + GRAMMAR


def _dotted(flat: str) -> str:
    """``server.tool`` for a plain flat name (the way to write it), else the flat name itself."""
    server, sep, tool = flat.partition("__")
    return f"{server}.{tool}" if sep and flat_tool_name(server, tool) == flat and "__" not in tool else flat


def parse_call(line: str, offered: Mapping[str, _Tool]) -> tuple[str, dict[str, Any]]:
    """``(flat name, arguments)`` of one line (see the module docstring); :class:`DirectError` saying what is
    wrong, naming the line."""
    line = line.strip()
    if line.startswith("{"):
        name, arguments = _json_line(line)
    else:
        words = line.split(None, 1)
        if words[0].lower() == "call":
            words = words[1].split(None, 1) if len(words) > 1 else []
        if not words:
            raise DirectError(f"{line!r}: which tool? Nothing follows 'call'.")
        name, rest = words[0], (words[1].strip() if len(words) > 1 else "")
        arguments = _json_object(rest, line) if rest.startswith("{") else _key_values(rest, line)
    return _resolve(name, offered, line), arguments


def _json_line(line: str) -> tuple[str, dict[str, Any]]:
    value = _json_object(line, line)
    name, arguments = value.get("tool"), value.get("arguments", {})
    if not isinstance(name, str) or not isinstance(arguments, dict):
        raise DirectError(f'{line!r}: a JSON line needs "tool" (a string) and "arguments" (an object).')
    return name, arguments


def _json_object(text: str, line: str) -> dict[str, Any]:
    try:
        return untrusted_json.loads_object(text, allow_nan=False)
    except ValueError as error:
        raise DirectError(f"{line!r}: not a JSON object ({error}).") from None


def _key_values(text: str, line: str) -> dict[str, Any]:
    try:
        words = shlex.split(text)
    except ValueError as error:
        raise DirectError(f"{line!r}: {error}.") from None
    arguments: dict[str, Any] = {}
    for word in words:
        key, sep, raw = word.partition("=")
        if not sep or not key:
            raise DirectError(f"{line!r}: {word!r} is not key=value.")
        arguments[key] = _value(raw)
    return arguments


def _value(raw: str) -> Any:
    """A ``key=value`` value: JSON when it is JSON (``NaN`` is not), else the text."""
    try:
        return untrusted_json.loads(raw, allow_nan=False)
    except ValueError:
        return raw


def _resolve(name: str, offered: Mapping[str, _Tool], line: str) -> str:
    """The flat name ``name`` (``server.tool`` or ``server__tool``) stands for among the offered tools."""
    if name in offered:
        return name
    server, sep, tool = name.partition(".")
    while sep:  # a server id may itself contain dots: try each split, leftmost tool name last
        flat = flat_tool_name(server, tool)
        if flat in offered:
            return flat
        head, sep, tool = tool.partition(".")
        server = f"{server}.{head}"
    known = ", ".join(_dotted(n) for n in offered) or "none (this assistant has no mcp.servers)"
    raise DirectError(f"{line!r}: no tool {name!r} is offered. Offered: {known}.")
