"""Assembling the chunks of an OpenAI-compatible Chat Completions answer into deltas and a completion.

Streamed chunks carry text, ``reasoning_content`` (or ``reasoning``) and tool-call fragments; a
call's fragments are joined by their ``index`` (else their ``id``), since several calls may be
interleaved and ids and names arrive once while arguments arrive in pieces. Every field is
untrusted: one of the wrong type raises :class:`~yao_actors.errors.ModelStreamError` naming it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from yao_actors.errors import ModelStreamError
from yao_actors.models.base import Completion, Delta, ReasoningDelta, TextDelta, ToolCall, ToolCallDelta, Usage


@attrs.define
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = attrs.field(factory=list)


@attrs.define
class ChunkAssembly:
    """Accumulates chunks into a completion and turns each into the deltas it carries."""

    text: list[str] = attrs.field(factory=list)
    reasoning: list[str] = attrs.field(factory=list)
    calls: list[_PartialCall] = attrs.field(factory=list)
    positions: dict[Any, int] = attrs.field(factory=dict)
    finish_reason: str | None = None
    usage: Usage | None = None
    done: bool = False

    def apply(self, chunk: Mapping[str, Any]) -> list[Delta]:
        """The deltas of one chunk; a chunk whose fields have the wrong types raises ``ModelStreamError``."""
        if usage := member(chunk, "usage", dict, "usage"):
            self.usage = _usage(usage)
        choices = member(chunk, "choices", list, "choices")
        if not choices:
            return []
        choice = expect(choices[0], dict, "choices[0]")
        self.finish_reason = member(choice, "finish_reason", str, "choices[0].finish_reason") or self.finish_reason
        delta = member(choice, "delta", dict, "choices[0].delta") or {}
        deltas: list[Delta] = []
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self.reasoning.append(reasoning)
            deltas.append(ReasoningDelta(reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            self.text.append(content)
            deltas.append(TextDelta(content))
        for entry in member(delta, "tool_calls", list, "choices[0].delta.tool_calls") or ():
            call_delta = self._call_fragment(expect(entry, dict, "a tool_calls entry"))
            if call_delta is not None:
                deltas.append(call_delta)
        return deltas

    def _call_fragment(self, entry: Mapping[str, Any]) -> ToolCallDelta | None:
        member(entry, "id", str, "tool_calls[].id")
        if not isinstance(entry.get("index"), int | None):
            raise ModelStreamError("malformed chunk from the model endpoint: tool_calls[].index must be an integer")
        position = self._position(entry)
        call = self.calls[position]
        function = member(entry, "function", dict, "tool_calls[].function") or {}
        member(function, "name", str, "tool_calls[].function.name")
        new_id = entry.get("id") if entry.get("id") and not call.id else None
        new_name = function.get("name") if function.get("name") and not call.name else None
        arguments = member(function, "arguments", str, "tool_calls[].function.arguments") or ""
        call.id = new_id or call.id
        call.name = new_name or call.name
        call.arguments.append(arguments)
        if new_id is None and new_name is None and not arguments:
            return None
        return ToolCallDelta(index=position, id=new_id, name=new_name, arguments=arguments)

    def _position(self, entry: Mapping[str, Any]) -> int:
        """The call a fragment belongs to: by ``index``, else by ``id``, else the latest call."""
        call_id = entry.get("id")
        key = entry.get("index")
        if key is None:
            key = call_id
        if key is None and self.calls:
            return len(self.calls) - 1
        position = self.positions.get(key)
        if position is None or (call_id and self.calls[position].id not in ("", call_id)):
            position = len(self.calls)
            self.calls.append(_PartialCall())
            self.positions[key] = position
        return position

    def completion(self) -> Completion:
        calls = tuple(
            ToolCall(id=call.id or f"call_{i}", name=call.name, arguments="".join(call.arguments))
            for i, call in enumerate(self.calls)
        )
        return Completion(
            text="".join(self.text),
            tool_calls=calls,
            finish_reason=self.finish_reason,
            usage=self.usage,
            reasoning="".join(self.reasoning) or None,
        )


_TYPE_NAMES: dict[type, str] = {dict: "an object", list: "an array", str: "a string"}


def expect(value: Any, kind: type, where: str) -> Any:
    """``value`` if it is a ``kind``; a ``ModelStreamError`` naming ``where`` otherwise."""
    if not isinstance(value, kind):
        raise ModelStreamError(
            f"malformed chunk from the model endpoint: {where} must be {_TYPE_NAMES[kind]}, got {value!r:.80}"
        )
    return value


def member(data: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    """``data[key]`` checked to be a ``kind``; ``None`` when it is missing or null."""
    value = data.get(key)
    return None if value is None else expect(value, kind, where)


def _usage(raw: Mapping[str, Any]) -> Usage:
    """Token counts; a count that is not a non-negative integer counts as missing."""
    prompt = _count(raw.get("prompt_tokens"))
    completion = _count(raw.get("completion_tokens"))
    return Usage(prompt, completion, _count(raw.get("total_tokens")) or prompt + completion)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
