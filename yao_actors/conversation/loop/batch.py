"""A batch of tool calls in flight (:class:`PendingBatch`): what dispatch has told of it so far, by position, and
what a run cancelled meanwhile keeps of it (:meth:`PendingBatch.settled`)."""

from __future__ import annotations

import attrs

from yao_actors.errors import ErrorKind
from yao_actors.models.base import ToolCall
from yao_actors.tools.catalog import Catalog
from yao_actors.tools.dispatch import failed_result
from yao_actors.tools.results import ToolCallResult


@attrs.define(eq=False)
class PendingBatch:
    """A batch of tool calls in flight, by position: each call's result once dispatch has told it
    (``CallFinished``, the one way a result comes back), and the tool message content its ``TOOL_CALL_RESULT``
    carried (encoded once for both; ``None`` while it is not told)."""

    calls: tuple[ToolCall, ...]
    catalog: Catalog
    results: list[ToolCallResult | None] = attrs.field(init=False)
    contents: list[str | None] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.results = [None] * len(self.calls)
        self.contents = [None] * len(self.calls)

    def finished(self) -> list[ToolCallResult]:
        """Every call's result, in order (once dispatch is over: it tells one per call)."""
        results = [result for result in self.results if result is not None]
        assert len(results) == len(self.calls)  # dispatch answers every call
        return results

    def settled(self) -> list[ToolCallResult]:
        """Every call's result as a cancelled run keeps it, in order: the one it had, else (none yet, or only a
        question for the user, which no one will answer now) ``cancelled``."""
        return [_settled(result, call, self.catalog) for result, call in zip(self.results, self.calls, strict=True)]


def _settled(result: ToolCallResult | None, call: ToolCall, catalog: Catalog) -> ToolCallResult:
    if result is None or result.kind is ErrorKind.INPUT_REQUIRED:
        message = "the run was cancelled before the call finished"
        return failed_result(call, catalog.resolve(call.name), message, ErrorKind.CANCELLED)
    return result
