"""A batch of tool calls in flight (:class:`PendingBatch`): each call's result as dispatch tells it, by position,
and what a run cancelled meanwhile keeps of it (:meth:`PendingBatch.settled`)."""

from __future__ import annotations

import attrs

from yao_actors.errors import ErrorKind
from yao_actors.models.base import ToolCall
from yao_actors.tools.catalog import Catalog
from yao_actors.tools.dispatch import failed_result
from yao_actors.tools.results import ToolCallResult


@attrs.frozen
class Told:
    """A call's result, and the tool message content its ``TOOL_CALL_RESULT`` carried (encoded once for both;
    ``None`` when no such event was emitted: a question for the user, or a result a cancelled run made)."""

    result: ToolCallResult
    content: str | None = None


@attrs.define(eq=False)
class PendingBatch:
    """A batch of tool calls in flight: each call's result once dispatch has told it (its ``CallFinished``, the one
    way a result comes back), by the call's position."""

    calls: tuple[ToolCall, ...]
    catalog: Catalog
    told: list[Told | None] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.told = [None] * len(self.calls)

    def finished(self) -> list[Told]:
        """Every call's result, in order (once dispatch is over: it tells one per call)."""
        told = [each for each in self.told if each is not None]
        assert len(told) == len(self.calls)  # dispatch answers every call
        return told

    def settled(self) -> list[Told]:
        """Every call's result as a cancelled run keeps it, in order: the one it had, else (none yet, or only a
        question for the user, which no one will answer now) ``cancelled``."""
        return [_settled(each, call, self.catalog) for each, call in zip(self.told, self.calls, strict=True)]


def _settled(told: Told | None, call: ToolCall, catalog: Catalog) -> Told:
    if told is None or told.result.kind is ErrorKind.INPUT_REQUIRED:
        message = "the run was cancelled before the call finished"
        return Told(failed_result(call, catalog.resolve(call.name), message, ErrorKind.CANCELLED))
    return told
