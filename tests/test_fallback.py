"""The fallback brief (the seed's Markdown layout, with the seed's two faults fixed) and prompts."""

from __future__ import annotations

from typing import Any

from yao_actors.conversation.loop.fallback import (
    FALLBACK_ASSISTANT_ID,
    FALLBACK_PROMPT,
    build_fallback_brief,
    fallback_messages,
    message_text,
)
from yao_actors.conversation.loop.prompt import TOOL_RETRY_PROMPT
from yao_actors.errors import ErrorKind
from yao_actors.tools.results import ToolCallResult

GOLDEN = (
    "## Assistant Context\n\nS\n\n## Conversation\n\n**User**: Q\n\n**Assistant**: A\n\n## Tool Results\n\n"
    '### w.f\n```json\n{"t":25}\n```\n\n### x\nError: E\n\n---\n'
    "Please answer the user's question based on the above context and tool results.\n"
    "Respond in the same language as the user.\n"
)

RESULTS = [
    ToolCallResult(call_id="1", name="w__f", server="w", tool="f", arguments="{}", result={"t": 25}),
    ToolCallResult(call_id="2", name="x", server="", tool="x", arguments="", error="E", kind=ErrorKind.UNKNOWN_TOOL),
]


def test_golden_with_assistant_prompt() -> None:
    messages = [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]
    assert build_fallback_brief(["S"], messages, RESULTS) == GOLDEN


def test_golden_with_system_message_in_history() -> None:
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "A"},
    ]
    assert build_fallback_brief([], messages, RESULTS) == GOLDEN


def test_empty_texts_and_other_roles_are_skipped() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Q"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "1"}]},
        {"role": "tool", "content": "{}", "tool_call_id": "1"},
        {"role": "assistant", "content": None},
    ]
    brief = build_fallback_brief(["", "P"], messages, [])
    assert brief.startswith("## Assistant Context\n\nP\n\n## Conversation\n\n**User**: Q\n\n## Tool Results\n\n---\n")


def test_all_results_keep_order_key_order_and_non_ascii() -> None:
    results = [
        ToolCallResult(call_id=str(i), name="w__get", server="weather", tool="get", arguments="", result=value)
        for i, value in enumerate([{"z": 1, "a": "北京"}, None, [1, "<b>"]])
    ]
    brief = build_fallback_brief([], [], results)
    assert '```json\n{"z":1,"a":"北京"}\n```' in brief
    assert "```json\nnull\n```" in brief
    assert '```json\n[1,"<b>"]\n```' in brief
    assert brief.count("### weather.get\n") == 3


def test_unresolved_name_falls_back_to_flat_name() -> None:
    result = ToolCallResult(call_id="1", name="zzz__t", server="", tool="", arguments="", error="unknown tool")
    assert "### zzz__t\nError: unknown tool\n\n" in build_fallback_brief([], [], [result])


def test_message_text_rules() -> None:
    assert message_text(None) == ""
    assert message_text("x") == "x"
    parts = [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}}, {"type": "text", "text": "b"}]
    assert message_text(parts) == "a\nb"
    assert message_text(3) == "3"


def test_prompt_is_the_seed_text() -> None:
    assert FALLBACK_ASSISTANT_ID == "__yao.loop_fallback"
    assert FALLBACK_PROMPT.startswith("You are a response synthesizer for an AI assistant.\nYou are the FALLBACK")
    assert FALLBACK_PROMPT.endswith("suggest rephrasing\n")
    assert not FALLBACK_PROMPT.endswith("\n\n")
    assert '\n### "## Assistant Context"\nThis is the system prompt' in FALLBACK_PROMPT
    assert fallback_messages("B") == [
        {"role": "system", "content": FALLBACK_PROMPT},
        {"role": "user", "content": "B"},
    ]


def test_retry_prompt_is_a_real_instruction() -> None:
    assert "assistant.agent" not in TOOL_RETRY_PROMPT
    for word in ("failed", "arguments", "schema", "without"):
        assert word in TOOL_RETRY_PROMPT
