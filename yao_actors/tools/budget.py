"""The result budget: how much of its tool results a model sees, and how a longer result is cut.

One result longer than ``per_result`` characters is cut at a line or JSON
boundary and ends with a note the model can act on (``… [cut: 1.2 MB result,
first 32 KB shown; ...]``); when one turn's results together are longer than
``per_turn``, the largest are cut first, down to a common length, until they
fit. The budget shapes only what a model is sent (:func:`model_view`, and the
fallback brief through :func:`fit_results`): the whole result stays in the
``TOOL_CALL_RESULT`` event and the thread's history, so a later model with a
larger budget sees more of it. Sizes are counted in characters (what a
model's context holds); the note shows them with binary units (``KB`` = 1024).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from yao_actors.specs import MIN_RESULT_BUDGET, ResultBudget
from yao_actors.store.records import Message

#: JSON text up to its last closing bracket, or up to its last comma, outside strings (the greedy repetition
#: takes everything, then gives back until the next character is one: one C-level match, no Python loop).
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_TO_LAST_CLOSER = re.compile(rf"(?:[^\"]|{_STRING})*[\]}}]")
_TO_LAST_COMMA = re.compile(rf"(?:[^\"]|{_STRING})*,")

_HINT = "ask the tool for less (a narrower query, a page, a range) to see the rest"


def format_size(count: int) -> str:
    """``count`` characters as ``532 B``, ``48 KB``, ``1.2 MB`` (one decimal below 10)."""
    if count < 1024:
        return f"{count} B"
    for unit, scale in (("KB", 1024), ("MB", 1024**2), ("GB", 1024**3)):
        value = count / scale
        if value < 1024 or unit == "GB":
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def cut_note(total: int, shown: int) -> str:
    """The note that ends a cut result: how large the whole was, how much is shown, and what to do."""
    return f"\n… [cut: {format_size(total)} result, first {format_size(shown)} shown; {_HINT}]"


#: The longest note: what a cut reserves for it.
_NOTE_ROOM = len(cut_note(1023 * 1024**3, 1023 * 1024**3))


def _boundary(text: str, limit: int) -> int:
    """Where to cut ``text`` to keep at most ``limit`` characters: at a line break (or after the escaped line
    break of a JSON string), else after a closing bracket outside JSON strings (a whole object or list), else
    before such a comma, else at a space; each only in the second half of ``limit``, or at ``limit`` itself."""
    half = limit // 2
    line = text.rfind("\n", 0, limit + 1)
    if line >= half:
        return line
    escaped = _escaped_line_break(text, half, limit)
    if escaped >= half:
        return escaped
    closed = _TO_LAST_CLOSER.match(text, 0, limit)
    if closed is not None and closed.end() >= half:
        return closed.end()
    comma = _TO_LAST_COMMA.match(text, 0, limit)
    if comma is not None and comma.end() - 1 >= half:
        return comma.end() - 1
    space = text.rfind(" ", 0, limit)
    return space if space >= half else limit


def _escaped_line_break(text: str, start: int, limit: int) -> int:
    """Where the last ``\\n`` escape of a JSON string (a text result shown as JSON) ends in ``text[start:limit]``,
    or -1; a ``\\n`` whose backslash is itself escaped (an odd number of backslashes before it) is no line break."""
    end = limit
    while (found := text.rfind("\\n", start, end)) >= 0:
        before = found
        while before > 0 and text[before - 1] == "\\":
            before -= 1
        if (found - before) % 2 == 0:
            return found + 2
        end = found + 1
    return -1


def cut_text(text: str, limit: int) -> str:
    """``text`` when it has at most ``limit`` characters; else its start, cut at a boundary, and the note (the
    whole at most ``limit`` characters)."""
    if len(text) <= limit:
        return text
    keep = _boundary(text, max(limit - _NOTE_ROOM, 1))
    return text[:keep] + cut_note(len(text), keep)


def turn_limits(lengths: Sequence[int], budget: ResultBudget) -> list[int]:
    """The most characters each of one turn's results may keep: ``per_result`` each, and when they still
    exceed ``per_turn`` together, one common cap on the largest (never below the smallest budget)."""
    capped = [min(length, budget.per_result) for length in lengths]
    limits = [budget.per_result] * len(lengths)
    if sum(capped) <= budget.per_turn:
        return limits
    remaining = budget.per_turn
    ordered = sorted(capped)
    cap = ordered[-1]
    for index, length in enumerate(ordered):
        left = len(ordered) - index
        if length * left > remaining:
            cap = remaining // left
            break
        remaining -= length
    cap = max(cap, MIN_RESULT_BUDGET)
    return [min(limit, cap) for limit in limits]


def fit_results(contents: Sequence[str], budget: ResultBudget) -> list[str]:
    """One turn's results as the model may see them (each cut to its limit from :func:`turn_limits`)."""
    limits = turn_limits([len(content) for content in contents], budget)
    return [cut_text(content, limit) for content, limit in zip(contents, limits, strict=True)]


def _fit_group(messages: list[Message], start: int, end: int, budget: ResultBudget) -> bool:
    """Fit the tool messages ``messages[start:end]`` (one turn's) in place; whether any was cut."""
    group = messages[start:end]
    contents = [message.get("content") for message in group]
    texts = [content if isinstance(content, str) else "" for content in contents]
    fitted = fit_results(texts, budget)
    changed = False
    for offset, (message, content, text) in enumerate(zip(group, contents, fitted, strict=True)):
        if isinstance(content, str) and text is not content:
            messages[start + offset] = {**message, "content": text}
            changed = True
    return changed


def model_view(messages: Sequence[Message], budget: ResultBudget) -> Sequence[Message]:
    """``messages`` as a model is sent them: the tool messages of each turn (a run of consecutive ``tool``
    messages) within ``budget``. The same sequence when nothing needs cutting; never changes ``messages``.

    Called before every model call on the whole history: it looks at each message once, measuring a turn's
    results as it goes, and copies the history only when some must be cut.
    """
    view: list[Message] | None = None
    start: int | None = None  # where the current run of tool messages began
    largest = total = 0
    for index, message in enumerate(messages):
        if message.get("role") == "tool":
            content = message.get("content")
            length = len(content) if isinstance(content, str) else 0
            if start is None:
                start, largest, total = index, length, length
            else:
                largest, total = max(largest, length), total + length
        elif start is not None:
            view = _fitted(messages, view, start, index, largest, total, budget)
            start = None
    if start is not None:
        view = _fitted(messages, view, start, len(messages), largest, total, budget)
    return messages if view is None else view


def _fitted(
    messages: Sequence[Message],
    view: list[Message] | None,
    start: int,
    end: int,
    largest: int,
    total: int,
    budget: ResultBudget,
) -> list[Message] | None:
    """The view with the turn ``messages[start:end]`` fitted when its results (``largest``, ``total``
    characters) exceed ``budget``; ``view`` (``None``: no copy yet) as it was when they do not."""
    if largest <= budget.per_result and total <= budget.per_turn:
        return view
    view = list(messages) if view is None else view
    _fit_group(view, start, end, budget)
    return view
