"""What makes a decoded frame unsafe to handle: nesting deeper than :data:`MAX_DEPTH`, or text that is not UTF-8.

Both the websocket frames (:mod:`yao_actors.service.protocol`) and the HTTP bodies
(:mod:`yao_actors.service.agui_input`) are checked here before anything else reads them; the check walks the tree
without recursion, so a deep value cannot exhaust the stack, and text that plainly cannot hold either problem is
not walked at all.
"""

from __future__ import annotations

from typing import Any, Final

#: The deepest nesting of arrays and objects a frame may have (a run frame needs 4).
MAX_DEPTH: Final = 64


def hostile_value(data: Any) -> str | None:
    """What makes a decoded frame unsafe to handle (too deep, or a string that is not UTF-8), or ``None``.

    Walks the tree without recursion, so a deep frame cannot exhaust the stack here either.
    """
    pending: list[tuple[Any, tuple[str | int, ...]]] = [(data, ())]
    while pending:
        value, path = pending.pop()
        if isinstance(value, str) and not is_text(value):
            return f"{json_path(path)}: not valid text (it cannot be encoded as UTF-8, e.g. a lone surrogate)"
        if not isinstance(value, dict | list):
            continue
        if len(path) >= MAX_DEPTH:
            return f"{json_path(path[:3])}…: nested deeper than {MAX_DEPTH} levels"
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(key, str) and not is_text(key):
                return f"{json_path(path)}: a key is not valid text (it cannot be encoded as UTF-8)"
            pending.append((item, (*path, key)))
    return None


def plainly_safe(text: str) -> bool:
    """Whether JSON ``text`` (itself valid UTF-8) cannot decode to anything :func:`hostile_value` refuses.

    A string that is not UTF-8 can only come from a ``\\uD800``-style escape, and a value nested past
    :data:`MAX_DEPTH` needs more than ``MAX_DEPTH`` opening brackets: text with neither needs no walk.
    """
    if text.count("{") + text.count("[") > MAX_DEPTH:
        return False
    return "\\u" not in text or "\\ud" not in text.lower()


def is_text(value: str) -> bool:
    """Whether ``value`` can be encoded as UTF-8 (JSON's ``\\ud800`` escapes decode to strings that cannot)."""
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def json_path(path: Any) -> str:
    """``["messages", 0, "role"]`` → ``messages[0].role`` (``frame`` for the whole object)."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text.lstrip(".") or "frame"
