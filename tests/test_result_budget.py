"""The result budget (issue 33): a result cut at a line or JSON boundary with a note, the largest of a turn cut
first, only what the model is sent cut, the fallback brief within the same budget, and the config key."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yao_actors.config import parse_config
from yao_actors.conversation.loop.fallback import build_fallback_brief
from yao_actors.errors import ConfigError
from yao_actors.specs import MIN_RESULT_BUDGET, ResultBudget
from yao_actors.tools.budget import cut_text, fit_results, format_size, model_view, turn_limits
from yao_actors.tools.results import ToolCallResult

RECORDS = json.dumps([{"id": i, "name": f"a }}, ]] {i}", "tags": ["x", "y"]} for i in range(5000)])


def shown_part(text: str) -> str:
    """What a cut text keeps of the original (before its note)."""
    return text.split("\n… [cut: ", 1)[0]


def test_a_short_result_is_left_as_it_is() -> None:
    assert cut_text("abc", 256) == "abc"
    assert cut_text("x" * 256, 256) == "x" * 256


def test_a_long_json_result_is_cut_after_a_whole_record_with_a_note() -> None:
    cut = cut_text(RECORDS, 4096)
    assert len(cut) <= 4096
    kept = shown_part(cut)
    assert RECORDS.startswith(kept)
    assert kept.endswith('"tags": ["x", "y"]}')  # a whole record: the brackets inside the names were not taken
    assert len(kept) > 2048
    assert cut.endswith(f"[cut: {format_size(len(RECORDS))} result, first {format_size(len(kept))} shown; "
                        "ask the tool for less (a narrower query, a page, a range) to see the rest]")  # fmt: skip


def test_lines_are_cut_at_a_line_break() -> None:
    text = "\n".join(f"line {i}" for i in range(100_000))
    kept = shown_part(cut_text(text, 1000))
    assert text.startswith(kept)
    assert kept.endswith("line " + kept.rsplit("line ", 1)[1])
    assert text[len(kept)] == "\n"


def test_a_text_result_shown_as_a_json_string_is_cut_after_an_escaped_line_break() -> None:
    text = json.dumps("\n".join(f"line {i} \\n" for i in range(10_000)))  # lines ending in a backslash and an n
    kept = shown_part(cut_text(text, 1000))
    assert text.startswith(kept)
    assert kept.endswith("\\\\n\\n")  # the escaped backslash and n, then the line break


def test_sizes_read_like_sizes() -> None:
    assert [format_size(n) for n in (532, 48 * 1024, 1_258_291, 10 * 1024**3)] == ["532 B", "48 KB", "1.2 MB", "10 GB"]


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=0, max_size=3000), st.integers(min_value=MIN_RESULT_BUDGET, max_value=2000))
def test_a_cut_keeps_to_its_limit_and_shows_a_start_of_the_text(text: str, limit: int) -> None:
    cut = cut_text(text, limit)
    assert len(cut) <= limit
    assert text.startswith(shown_part(cut))
    assert (cut == text) == (len(text) <= limit)


def test_the_largest_results_of_a_turn_are_cut_first() -> None:
    budget = ResultBudget(per_result=1000, per_turn=2000)
    assert turn_limits([100, 900, 900], budget) == [1000, 1000, 1000]  # 1900 fits
    assert turn_limits([100, 5000, 1500, 500], budget) == [700] * 4  # 100 + 500 + 700 + 700 = 2000
    fitted = fit_results(["a" * 100, "b" * 5000, "c" * 1500, "d" * 500], budget)
    assert [len(text) for text in fitted][::3] == [100, 500]
    assert sum(len(text) for text in fitted) <= 2000
    assert all("[cut: " in text for text in fitted[1:3])


def test_many_results_are_never_cut_below_the_smallest_budget() -> None:
    limits = turn_limits([10_000] * 100, ResultBudget(per_result=1000, per_turn=1000))
    assert limits == [MIN_RESULT_BUDGET] * 100


def test_only_the_models_view_is_cut_the_messages_stay_whole() -> None:
    big = "z" * 50_000
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "tool", "tool_call_id": "1", "content": big},
        {"role": "tool", "tool_call_id": "2", "content": "small"},
        {"role": "assistant", "content": "a"},
        {"role": "tool", "tool_call_id": "3", "content": big},
    ]
    view = model_view(messages, ResultBudget(per_result=1000, per_turn=4000))
    assert messages[2]["content"] is big
    assert messages[5]["content"] is big
    assert [len(m["content"] or "") <= 1000 for m in view] == [True] * 6
    assert view[2]["tool_call_id"] == "1"
    assert "[cut: 49 KB result" in view[2]["content"]
    assert view[3] is messages[3]
    small = [{"role": "tool", "tool_call_id": "1", "content": "x"}]
    assert model_view(small, ResultBudget()) is small


def test_the_fallback_brief_uses_the_same_budget() -> None:
    results = [
        ToolCallResult("c1", "s__big", "s", "big", "{}", result={"text": "w " * 40_000}),
        ToolCallResult("c2", "s__small", "s", "small", "{}", result={"ok": True}),
    ]
    brief = build_fallback_brief([], [{"role": "user", "content": "q"}], results, ResultBudget(1000, 2000))
    assert '### s.small\n```json\n{"ok":true}\n```' in brief
    big = brief.split("### s.big\n```json\n", 1)[1].split("\n```", 1)[0]
    assert len(big) <= 1000
    assert "[cut: 78 KB result" in big


def config_with(budget: Any) -> dict[str, Any]:
    return {"assistants": {"a": {"model": "demo", "result_budget": budget}}}


def test_the_config_key_and_its_defaults() -> None:
    assert parse_config({"assistants": {"a": {"model": "demo"}}}).assistants["a"].result_budget == ResultBudget(
        32768, 131072
    )
    parsed = parse_config(config_with({"per_result": 1000})).assistants["a"].result_budget
    assert parsed == ResultBudget(1000, 131072)


@pytest.mark.parametrize(
    ("budget", "path", "words"),
    [
        ({"per_result": "big"}, "assistants.a.result_budget.per_result", "integer"),
        ({"per_turn": 10}, "assistants.a.result_budget.per_turn", "256"),
        ({"per_call": 10}, "assistants.a.result_budget.per_call", ""),
        (1000, "assistants.a.result_budget", "object"),
    ],
)
def test_a_bad_budget_is_refused_with_its_key_path(budget: Any, path: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(config_with(budget))
    assert any(problem.startswith(path) and words in problem for problem in caught.value.problems), caught.value
