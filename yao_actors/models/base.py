"""The model interface the conversation actor talks to.

A model takes OpenAI-style chat messages (plain dicts) and OpenAI tool schemas and
returns one assembled :class:`Completion`. While it works it reports
:data:`Delta` values to ``on_delta`` as they arrive, so the front end can relay a
stream as it happens; a model never buffers a stream to its end before
reporting it. Any object with a matching ``complete`` method is a model
(:class:`Model` is a Protocol): the OpenAI-compatible client, the offline models
of :mod:`yao_actors.testing`, or a user's own class.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from yao_actors.tools.tool_call import ToolCall as ToolCall  # defined below the tool core, which runs it

if TYPE_CHECKING:
    from yao_actors.tools.hints import ToolHints

Message = Mapping[str, Any]
"""An OpenAI Chat Completions message: ``{"role": ..., "content": ..., ...}``."""

ToolSchema = Mapping[str, Any]
"""An OpenAI tool: ``{"type": "function", "function": {"name", "description", "parameters"}}``."""


@attrs.frozen
class Usage:
    """Token counts; usages add up over the model calls of a run."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
        )


def _calls(calls: Iterable[ToolCall]) -> tuple[ToolCall, ...]:
    return tuple(calls)


def _default_finish_reason(completion: Completion) -> str:
    return "tool_calls" if completion.tool_calls else "stop"


@attrs.frozen
class Completion:
    """One model answer: text and/or tool calls, why it stopped, and what it cost.

    ``finish_reason`` is ``"tool_calls"`` when there are tool calls and ``"stop"`` otherwise, unless given.
    ``tool_calls`` may be any sequence (a list is kept as a tuple).
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), converter=_calls)
    finish_reason: str | None = attrs.field(default=attrs.Factory(_default_finish_reason, takes_self=True))
    usage: Usage | None = None
    reasoning: str | None = None

    def to_message(self) -> dict[str, Any]:
        """The assistant message that records this completion in a history."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.reasoning:
            message["reasoning_content"] = self.reasoning
        if self.tool_calls:
            message["tool_calls"] = [call.to_message() for call in self.tool_calls]
        return message


@attrs.frozen
class TextDelta:
    """A fragment of the answer's text."""

    text: str


@attrs.frozen
class ReasoningDelta:
    """A fragment of reasoning text (``reasoning_content``), when the endpoint sends it."""

    text: str


@attrs.frozen
class ToolCallDelta:
    """A fragment of a tool call: ``id`` and ``name`` arrive once, ``arguments`` in pieces.

    ``index`` is the call's position in the completion's ``tool_calls``.
    """

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


Delta = TextDelta | ReasoningDelta | ToolCallDelta
OnDelta = Callable[[Delta], Awaitable[None]]


@runtime_checkable
class Model(Protocol):
    """What the conversation actor needs from a model.

    ``complete`` streams one completion: it awaits ``on_delta`` for every
    fragment as it arrives (backpressure flows to the model) and returns the
    assembled completion. It raises :class:`~yao_actors.errors.ModelError`
    when the call failed after the model's own retries. Deadlines are set by the
    caller with cancel scopes.
    """

    name: str

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSchema],
        *,
        on_delta: OnDelta | None = None,
    ) -> Completion: ...


def with_tool_hints(model: Model, hints: Mapping[str, ToolHints]) -> Model:
    """``model`` for a run whose tools say ``hints`` of themselves (by flat name: read-only, destructive, ...).

    Only a model that decides by them has a ``with_tool_hints(hints) -> Model`` method (the offline test model,
    which calls read-only tools only); any other model is returned as it is.
    """
    method = getattr(model, "with_tool_hints", None)
    if method is None:
        return model
    derived: Model = method(hints)
    return derived


def images_per_turn(model: Model) -> int:
    """How many images of a turn's tool results ``model`` takes (its ``max_images``; 0, none, when it has none):
    an OpenAI-compatible model marked ``vision``, or a model of your own with a ``max_images`` attribute."""
    count = getattr(model, "max_images", 0)
    return count if isinstance(count, int) and count > 0 else 0


def with_params(model: Model, params: Mapping[str, Any]) -> Model:
    """``model`` with the request fields ``params`` merged over its own (an assistant's ``options``).

    Only a model that takes request fields has a ``with_params(params) -> Model``
    method (the OpenAI-compatible one); any other model is returned as it is.
    ``tools`` is not a request field here: the run offers static tools itself.
    """
    fields = {key: value for key, value in params.items() if key != "tools"}
    method = getattr(model, "with_params", None)
    if not fields or method is None:
        return model
    derived: Model = method(fields)
    return derived
