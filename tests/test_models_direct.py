"""The direct model's grammar: what a line of the user's message calls, and what it says when it cannot."""

from __future__ import annotations

import json
from typing import Any

import pytest

from yao_actors.models.direct import DirectModel

TOOLS = [
    {"type": "function", "function": {"name": n, "description": f"{n} does it", "parameters": {"type": "object"}}}
    for n in ("time__get_current_time", "github_enterprise__search", "fs__read_file")
]


async def calls(text: str) -> list[tuple[str, dict[str, Any]]]:
    completion = await DirectModel().complete([{"role": "user", "content": text}], TOOLS)
    return [(call.name, json.loads(call.arguments)) for call in completion.tool_calls]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("call time.get_current_time timezone=UTC", ("time__get_current_time", {"timezone": "UTC"})),
        ("time__get_current_time", ("time__get_current_time", {})),
        (
            "CALL fs.read_file path='/tmp/a b.txt' n=3 deep=true",
            ("fs__read_file", {"path": "/tmp/a b.txt", "n": 3, "deep": True}),
        ),
        ('fs.read_file tags=\'["a","b"]\' note=NaN', ("fs__read_file", {"tags": ["a", "b"], "note": "NaN"})),
        ('fs.read_file {"path": "/x", "n": 1}', ("fs__read_file", {"path": "/x", "n": 1})),
        (
            '{"tool": "github.enterprise.search", "arguments": {"q": "bug"}}',
            ("github_enterprise__search", {"q": "bug"}),
        ),
    ],
)
async def test_a_line_is_one_call_with_exactly_its_arguments(line: str, expected: tuple[str, dict[str, Any]]) -> None:
    assert await calls(line) == [expected]


async def test_a_message_of_several_lines_is_one_batch() -> None:
    script = "time.get_current_time timezone=UTC\n\nfs.read_file path=/a\n"
    assert [name for name, _ in await calls(script)] == ["time__get_current_time", "fs__read_file"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "time.get_time",
            "no tool 'time.get_time' is offered. Offered: time.get_current_time, github_enterprise.search",
        ),
        ("fs.read_file /tmp/a", "'/tmp/a' is not key=value"),
        ("fs.read_file path='unclosed", "No closing quotation"),
        ('fs.read_file {"path": ', "not a JSON object"),
        ("fs.read_file [1]", "'[1]' is not key=value"),
        ('{"tool": 3}', 'a JSON line needs "tool" (a string) and "arguments" (an object)'),
        ("call", "which tool?"),
        ("fs.read_file path=/a\nnope.x", "no tool 'nope.x'"),
    ],
)
async def test_what_it_cannot_read_is_said_and_nothing_is_called(text: str, said: str) -> None:
    completion = await DirectModel().complete([{"role": "user", "content": text}], TOOLS)
    assert completion.tool_calls == ()
    assert said in completion.text
    assert "Write one tool call a line" in completion.text


async def test_tools_lists_what_can_be_called_and_results_are_answered_one_a_line() -> None:
    listing = await DirectModel().complete([{"role": "user", "content": "tools"}], TOOLS)
    assert listing.text.startswith("Tools:\n- time.get_current_time: time__get_current_time does it\n")
    asked = [{"role": "user", "content": "time.get_current_time"}]
    first = await DirectModel().complete(asked, TOOLS)
    answered = [*asked, first.to_message(), {"role": "tool", "tool_call_id": first.tool_calls[0].id, "content": "noon"}]
    assert (await DirectModel().complete(answered, TOOLS)).text == "time__get_current_time: noon"
