"""How ``yao-actors chat`` prints a run: on a terminal (status lines rewritten in place) and to a pipe."""

from __future__ import annotations

import io
from typing import Any

from yao_actors.cli.chat_render import Renderer

CLEAR = "\r\x1b[K"


def _events() -> list[dict[str, Any]]:
    return [
        {"type": "RUN_STARTED"},
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "weather__get"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"city":'},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '"Beijing"}'},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {"type": "CUSTOM", "name": "tool_progress", "value": {"toolCallId": "c1", "progress": 1, "total": 2}},
        {
            "type": "TOOL_CALL_RESULT",
            "toolCallId": "c1",
            "content": '{"temp":3}',
            "metadata": {"server": "weather", "tool": "get", "durationMs": 12.4},
        },
        {"type": "CUSTOM", "name": "tool_retry", "value": {"attempt": 1, "toolCallIds": ["c2"]}},
        {"type": "CUSTOM", "name": "sequential_retry", "value": {"toolCallIds": ["c3"]}},
        {"type": "CUSTOM", "name": "server_status", "value": {"server": "weather", "state": "restarting"}},
        {"type": "SUBAGENT_STARTED", "name": "__yao.loop_fallback"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "北京今天"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "3°C。"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {
            "type": "RUN_FINISHED",
            "result": {"outcome": "fallback"},
            "usage": [{"inputTokens": 10, "outputTokens": 5, "totalTokens": 15}],
        },
    ]


def _render(events: list[dict[str, Any]], *, live: bool) -> str:
    out = io.StringIO()
    renderer = Renderer(out=out, live=live)
    for event in events:
        renderer.render(event)
    return out.getvalue()


def test_plain_output_has_one_line_per_state() -> None:
    assert _render(_events(), live=False).splitlines() == [
        '⚙ weather__get {"city":"Beijing"} … running',
        '⚙ weather__get {"city":"Beijing"} … 1/2',
        '✓ weather__get {"city":"Beijing"} → {"temp":3} (12 ms)',
        "↻ asking the model to fix 1 failed call(s) (attempt 1)",
        "↻ running 1 failed call(s) again, one by one",
        "⚠ server weather: restarting",
        "⇢ fallback: __yao.loop_fallback takes over",
        "北京今天3°C。",
        "— fallback · tokens: 10 in, 5 out, 15 total",
    ]


def test_a_terminal_gets_a_live_status_line_rewritten_until_the_result() -> None:
    printed = _render(_events()[:7], live=True)
    assert printed == (
        '⚙ weather__get {"city":"Beijing"} … running'
        + CLEAR
        + '⚙ weather__get {"city":"Beijing"} … 1/2'
        + CLEAR
        + '✓ weather__get {"city":"Beijing"} → {"temp":3} (12 ms)\n'
    )


def test_a_failed_call_and_a_run_error_are_marked() -> None:
    printed = _render(
        [
            {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "weather__get"},
            {"type": "TOOL_CALL_END", "toolCallId": "c1"},
            {
                "type": "TOOL_CALL_RESULT",
                "toolCallId": "c1",
                "content": "Error: server 'weather' unavailable",
                "metadata": {"kind": "server_unavailable", "durationMs": 1},
            },
            {"type": "RUN_ERROR", "code": "model_error", "message": "HTTP 500"},
        ],
        live=False,
    )
    assert printed.splitlines()[1:] == [
        "✗ weather__get {} → Error: server 'weather' unavailable (1 ms)",
        "✗ error [model_error]: HTTP 500",
    ]


def test_text_before_a_tool_call_ends_its_line_first() -> None:
    printed = _render(
        [
            {"type": "TEXT_MESSAGE_CONTENT", "delta": "Let me check"},
            {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "t"},
            {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        ],
        live=True,
    )
    assert printed == "Let me check\n⚙ t {} … running"
