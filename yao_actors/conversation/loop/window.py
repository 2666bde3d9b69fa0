"""The history window: how much of a thread's stored history one request carries.

The seed sends "chat history (default 20) plus the cleaned input". A thread keeps its whole history (within the
runtime's own memory bound); only the request is windowed, by :func:`window_history`, from the oldest end and
by whole turns: an assistant message that asked for tools stays with its tool
messages, so the window never hands a model a tool message without its call, or
a call without its results. The assistant's system prompts are not part of the
history and are neither counted nor dropped.
"""

from __future__ import annotations

from collections.abc import Sequence

from yao_actors.models.base import Message


def _turns(history: Sequence[Message]) -> list[list[Message]]:
    """The history cut into units that stay together: a message, with the tool messages answering it."""
    units: list[list[Message]] = []
    for message in history:
        if message.get("role") == "tool" and units:
            units[-1].append(message)
        else:
            units.append([message])
    return units


def window_history(history: Sequence[Message], max_messages: int | None) -> list[Message]:
    """The newest whole units of ``history`` holding at most ``max_messages`` messages (``None``: all of it).

    Tool messages at the very start (their call already gone) are dropped too.
    """
    if max_messages is None:
        return list(history)
    kept: list[list[Message]] = []
    count = 0
    for unit in reversed(_turns(history)):
        if count + len(unit) > max_messages:
            break
        kept.append(unit)
        count += len(unit)
    window = [message for unit in reversed(kept) for message in unit]
    while window and window[0].get("role") == "tool":
        window.pop(0)
    return window
