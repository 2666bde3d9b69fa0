"""What a batch of tool calls tells its listener as it goes: a call started, its progress, its one result, a retry.

:func:`~yao_actors.tools.dispatch.execute_tool_calls` gives each of these to its ``on_event`` as it happens; a call's
result comes back that way only, once (:class:`CallFinished`). ``index`` is the call's position in the batch, so
duplicate or empty call ids never collapse.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs

from yao_actors.tools.results import ToolCallResult
from yao_actors.tools.tool_call import ToolCall


@attrs.frozen
class CallStarted:
    """A call was sent to its server."""

    call: ToolCall
    server: str
    tool: str
    index: int = 0


@attrs.frozen
class CallProgress:
    """A server reported progress of a running call."""

    call: ToolCall
    progress: float
    total: float | None
    message: str | None
    index: int = 0


@attrs.frozen
class CallFinished:
    """A call has its final result (exactly once per call)."""

    result: ToolCallResult
    index: int = 0


@attrs.frozen
class SequentialRetry:
    """These calls failed retryably while running concurrently and now run again, one by one."""

    call_ids: tuple[str, ...]
    indices: tuple[int, ...] = ()


DispatchEvent = CallStarted | CallProgress | CallFinished | SequentialRetry
OnEvent = Callable[[DispatchEvent], Awaitable[None]]
