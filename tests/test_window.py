"""The history window: the newest whole turns of a thread's history, within ``history.max_messages``."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from yao_actors.conversation.loop.window import window_history


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def answer(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def asks(*ids: str) -> dict[str, Any]:
    calls = [{"id": i, "type": "function", "function": {"name": "w__get", "arguments": "{}"}} for i in ids]
    return {"role": "assistant", "content": "", "tool_calls": calls}


def result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "{}"}


HISTORY = [user("q1"), answer("a1"), user("q2"), asks("c1", "c2"), result("c1"), result("c2"), answer("a2")]


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (None, HISTORY),
        (0, []),
        (1, HISTORY[6:]),
        (3, HISTORY[6:]),  # the tool turn is 3 messages: with the answer it would be 4
        (4, HISTORY[3:]),
        (5, HISTORY[2:]),
        (7, HISTORY),
        (100, HISTORY),
    ],
)
def test_window_keeps_the_newest_whole_turns(limit: int | None, expected: list[dict[str, Any]]) -> None:
    assert window_history(HISTORY, limit) == expected


def test_the_window_does_not_change_the_history() -> None:
    history = list(HISTORY)
    window_history(history, 2)
    assert history == HISTORY


ROLES = st.sampled_from(["user", "answer", "asks"])


@given(st.lists(ROLES, max_size=30), st.integers(min_value=0, max_value=40))
def test_no_window_separates_a_call_from_its_results(kinds: list[str], limit: int) -> None:
    history: list[dict[str, Any]] = []
    for n, kind in enumerate(kinds):
        if kind == "asks":
            history += [asks(f"c{n}a", f"c{n}b"), result(f"c{n}a"), result(f"c{n}b")]
        else:
            history.append(user(f"u{n}") if kind == "user" else answer(f"a{n}"))
    window = window_history(history, limit)
    assert len(window) <= limit
    assert window == history[len(history) - len(window) :]
    answered = {m["tool_call_id"] for m in window if m["role"] == "tool"}
    asked = {c["id"] for m in window for c in m.get("tool_calls", ())}
    assert answered == asked
