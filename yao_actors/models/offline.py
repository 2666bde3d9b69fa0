"""Offline models: honest stand-ins for a language model, for tests and the demo.

- :class:`FunctionModel` answers with whatever a Python function returns for the
  messages and tools, streaming it as deltas like a real model would.
- :class:`TestModel` calls every tool it is offered once, with arguments made to
  satisfy each ``inputSchema``, then summarises the results.

The demo model, which knows the demo servers' tools, builds on these in
:mod:`yao_actors.demo.model`.

None of them understands language; their names say so.
"""

from __future__ import annotations

import collections
import inspect
import json
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from yao_actors.models.base import (
    Completion,
    Message,
    OnDelta,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSchema,
)
from yao_actors.models.schema_values import sample_value

if TYPE_CHECKING:
    from yao_actors.tools.hints import ToolHints

#: Calls a :class:`FunctionModel` keeps in :attr:`~FunctionModel.calls` unless told otherwise.
KEPT_CALLS = 64

ModelFunction = Callable[[list[dict[str, Any]], list[dict[str, Any]]], Completion | str | Awaitable[Completion | str]]
"""``fn(messages, tools)`` returning the next completion (or just its text), plain or async."""


@attrs.frozen
class RecordedCall:
    """One call of an offline model: what it was given and what it answered."""

    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...]
    completion: Completion


class FunctionModel:
    """A model whose answers come from ``fn(messages, tools)``.

    ``fn`` gets the messages and tools as new lists of dicts and returns a
    :class:`~yao_actors.models.base.Completion` or a string (a text answer);
    it may be async. The answer is reported to ``on_delta`` as a real stream
    would be: reasoning, then text, then each tool call (id and name first,
    then its arguments); with ``chunk_size`` set, text and arguments arrive in
    fragments of that many characters, else in one piece. With
    ``stream=False`` nothing is reported to ``on_delta``: the completion comes
    back whole, as from a model that does not stream (a run still emits the
    same text and tool-call events for it; the benchmarks use this mode, so
    they measure the runtime rather than this double's streaming).

    The most recent calls are kept in :attr:`calls` for tests to inspect: ``keep_calls`` of them
    (:data:`KEPT_CALLS` unless told; ``None`` keeps every call, as this class always did; ``0`` none).
    Each holds the messages it was given, the run's whole history, so a long-lived model keeps few: the
    models the runtime builds from a config keep none. :attr:`call_count` counts every call made.

    The dicts in the lists are the caller's own, not copies: like any model
    (the :class:`~yao_actors.models.base.Model` protocol takes them
    read-only), ``fn`` reads them and must not change them. Copying them would
    copy the whole, growing history at every call, once the largest part of
    what a turn of a run cost beyond its tool call. A run never changes a
    message once it is in a history, so the calls kept stay as they were made.
    """

    def __init__(
        self,
        fn: ModelFunction,
        *,
        name: str = "function model",
        chunk_size: int | None = None,
        stream: bool = True,
        keep_calls: int | None = KEPT_CALLS,
    ) -> None:
        self.fn = fn
        self.name = name
        self.chunk_size = chunk_size
        self.stream = stream
        self.calls: collections.deque[RecordedCall] = collections.deque(maxlen=keep_calls)
        self.call_count = 0

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSchema],
        *,
        on_delta: OnDelta | None = None,
    ) -> Completion:
        """Ask ``fn`` for the answer, record the call, and stream the answer to ``on_delta`` (unless ``stream`` is off)."""
        # Inline rather than a call per item: the history grows every turn, so this runs a lot.
        given_messages = [m if type(m) is dict else dict(m) for m in messages]
        given_tools = [t if type(t) is dict else dict(t) for t in tools]
        # Kept before ``fn`` has the lists, which are its own.
        kept = (tuple(given_messages), tuple(given_tools)) if self.calls.maxlen != 0 else None
        answer = self.fn(given_messages, given_tools)
        if not isinstance(answer, Completion | str) and inspect.isawaitable(answer):
            answer = await answer
        completion = Completion(text=answer) if isinstance(answer, str) else answer
        self.call_count += 1
        if kept is not None:
            self.calls.append(RecordedCall(*kept, completion))
        if on_delta is not None and self.stream:
            await self._stream(completion, on_delta)
        return completion

    def _pieces(self, text: str) -> list[str]:
        size = self.chunk_size or len(text) or 1
        return [text[i : i + size] for i in range(0, len(text), size)]

    async def _stream(self, completion: Completion, on_delta: OnDelta) -> None:
        for piece in self._pieces(completion.reasoning or ""):
            await on_delta(ReasoningDelta(piece))
        for piece in self._pieces(completion.text):
            await on_delta(TextDelta(piece))
        for index, call in enumerate(completion.tool_calls):
            await on_delta(ToolCallDelta(index=index, id=call.id, name=call.name))
            for piece in self._pieces(call.arguments):
                await on_delta(ToolCallDelta(index=index, arguments=piece))


# --------------------------------------------------------------------------- conversation reading


def text_of(message: Mapping[str, Any]) -> str:
    """The text of a message whose content is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def last_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text of the last user message ("" when there is none)."""
    return next((text_of(m) for m in reversed(messages) if m.get("role") == "user"), "")


def results_since_user(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Tool name -> tool message content, for the calls made since the last user message."""
    start = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1) + 1
    names: dict[str, str] = {}
    results: dict[str, str] = {}
    for message in messages[start:]:
        for call in message.get("tool_calls") or ():
            names[call.get("id", "")] = call.get("function", {}).get("name", "")
        if message.get("role") == "tool":
            results[names.get(message.get("tool_call_id", ""), "")] = text_of(message)
    return results


def tool_names(tools: Sequence[Mapping[str, Any]]) -> list[str]:
    """The function names of OpenAI tool schemas, in order."""
    return [tool.get("function", {}).get("name", "") for tool in tools]


def compact_args(value: Mapping[str, Any]) -> str:
    """``value`` as compact JSON text (tool call arguments)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# --------------------------------------------------------------------------- TestModel


class TestModel(FunctionModel):
    """Calls every offered read-only tool once, in one turn, then summarises the results.

    Arguments are made from each tool's ``inputSchema`` (see
    :mod:`yao_actors.models.schema_values`), the same ones for the same
    ``seed`` and tool name. Random arguments are safe only where nothing can be changed, so a tool its server does
    not mark ``readOnlyHint: true`` is skipped (and named in the answer) unless ``include_writes`` (an
    assistant's ``"options": {"include_writes": true}``). The run tells the model which tools are read-only
    (:meth:`with_tool_hints`); a model never told calls none but says so. When the last message is a tool result it
    answers with one line per result instead; with no tools it says so.
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        *,
        seed: int = 0,
        chunk_size: int | None = None,
        keep_calls: int | None = KEPT_CALLS,
        include_writes: bool = False,
        read_only: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__(
            self._answer, name="test model (offline stand-in)", chunk_size=chunk_size, keep_calls=keep_calls
        )
        self.seed = seed
        self.include_writes = include_writes
        self.read_only = read_only

    def with_params(self, params: Mapping[str, Any]) -> TestModel:
        """This model with an assistant's ``options``: ``include_writes`` (a boolean) is the one it reads."""
        return self._derived(include_writes=params.get("include_writes") is True)

    def with_tool_hints(self, hints: Mapping[str, ToolHints]) -> TestModel:
        """This model for a run offering tools with ``hints`` (by flat name): it calls the read-only ones."""
        return self._derived(read_only=frozenset(name for name, hint in hints.items() if hint.read_only))

    def _derived(self, *, include_writes: bool | None = None, read_only: frozenset[str] | None = None) -> TestModel:
        """A copy with these changes, keeping its record of calls in this model's (:attr:`calls`)."""
        model = TestModel(
            seed=self.seed,
            chunk_size=self.chunk_size,
            include_writes=self.include_writes if include_writes is None else include_writes,
            read_only=self.read_only if read_only is None else read_only,
        )
        model.calls = self.calls
        return model

    def arguments_for(self, tool: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments this model sends to ``tool`` (an OpenAI tool schema)."""
        function = tool.get("function", {})
        schema = function.get("parameters") or {"type": "object"}
        value = sample_value(schema, random.Random(f"{self.seed}:{function.get('name', '')}"))
        return value if isinstance(value, dict) else {}

    def _answer(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        names = tool_names(tools)
        skipped = [] if self.include_writes else [name for name in names if name not in self.read_only]
        if messages and messages[-1].get("role") == "tool":
            results = results_since_user(messages)
            lines = [f"- {name}: {content}" for name, content in results.items()]
            return Completion(text=f"Called {len(results)} tool(s):\n" + "\n".join(lines) + _skipped_text(skipped))
        if not tools:
            return Completion(text="No tools were offered, so there is nothing to call.")
        turn = self.call_count  # the calls before this one
        calls = tuple(
            ToolCall(id=f"call_test_{turn}_{i}", name=name, arguments=compact_args(self.arguments_for(tool)))
            for i, (name, tool) in enumerate(zip(names, tools, strict=True))
            if name not in skipped
        )
        if not calls:
            return Completion(text="Called no tool." + _skipped_text(skipped))
        return Completion(tool_calls=calls, finish_reason="tool_calls")


def _skipped_text(skipped: Sequence[str]) -> str:
    """What the test model says of the tools it did not call."""
    if not skipped:
        return ""
    return (
        f"\nSkipped {len(skipped)} tool(s) not marked read-only (readOnlyHint), which random arguments could change"
        f" something with: {', '.join(skipped)}. To call them too, give the assistant"
        ' "options": {"include_writes": true}.'
    )
