"""Offline models: honest stand-ins for a language model, for tests and the demo.

- :class:`FunctionModel` answers with whatever a Python function returns for the
  messages and tools, streaming it as deltas like a real model would.
- :class:`TestModel` calls every tool it is offered once, with arguments made to
  satisfy each ``inputSchema``, then summarises the results.
- :class:`DemoModel` plays the seed's scenario against the demo ``weather`` and
  ``clothing`` MCP servers (weather, then clothing advice, then an answer in the
  user's language) and says plainly what it can do for anything else.

None of them understands language; their names say so.
"""

from __future__ import annotations

import inspect
import json
import random
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs

from yao_actors import untrusted_json
from yao_actors.models.base import (
    Completion,
    Message,
    OnDelta,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSchema,
)
from yao_actors.models.schema_values import sample_value

ModelFunction = Callable[[list[dict[str, Any]], list[dict[str, Any]]], Completion | str | Awaitable[Completion | str]]
"""``fn(messages, tools)`` returning the next completion (or just its text), plain or async."""


@attrs.frozen
class RecordedCall:
    """One call of an offline model: what it was given and what it answered."""

    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...]
    completion: Completion


class FunctionModel:
    """A model whose answers come from ``fn(messages, tools)``.

    ``fn`` gets the messages and tools as new lists of dicts and returns a
    :class:`~yao_actors.models.base.Completion` or a string (a text answer);
    it may be async. The answer is reported to ``on_delta`` as a real stream
    would be: reasoning, then text, then each tool call (id and name first,
    then its arguments); with ``chunk_size`` set, text and arguments arrive in
    fragments of that many characters, else in one piece. Every call is kept
    in :attr:`calls` for tests to inspect.

    The dicts in the lists are the caller's own, not copies: like any model
    (the :class:`~yao_actors.models.base.Model` protocol takes them
    read-only), ``fn`` reads them and must not change them. Copying them would
    copy the whole, growing history at every call, once the largest part of
    what a turn of a run cost beyond its tool call. A run never changes a
    message once it is in a history, so the calls kept stay as they were made.
    """

    def __init__(self, fn: ModelFunction, *, name: str = "function model", chunk_size: int | None = None) -> None:
        self.fn = fn
        self.name = name
        self.chunk_size = chunk_size
        self.calls: list[RecordedCall] = []

    async def complete(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSchema],
        *,
        on_delta: OnDelta | None = None,
    ) -> Completion:
        """Ask ``fn`` for the answer, record the call, and stream the answer to ``on_delta``."""
        given_messages = [_as_dict(m) for m in messages]
        given_tools = [_as_dict(t) for t in tools]
        answer = self.fn(list(given_messages), list(given_tools))
        if inspect.isawaitable(answer):
            answer = await answer
        completion = Completion(text=answer) if isinstance(answer, str) else answer
        self.calls.append(RecordedCall(tuple(given_messages), tuple(given_tools), completion))
        if on_delta is not None:
            await self._stream(completion, on_delta)
        return completion

    def _pieces(self, text: str) -> list[str]:
        size = self.chunk_size or len(text) or 1
        return [text[i : i + size] for i in range(0, len(text), size)]

    async def _stream(self, completion: Completion, on_delta: OnDelta) -> None:
        for piece in self._pieces(completion.reasoning or ""):
            await on_delta(ReasoningDelta(piece))
        for piece in self._pieces(completion.text):
            await on_delta(TextDelta(piece))
        for index, call in enumerate(completion.tool_calls):
            await on_delta(ToolCallDelta(index=index, id=call.id, name=call.name))
            for piece in self._pieces(call.arguments):
                await on_delta(ToolCallDelta(index=index, arguments=piece))


def _as_dict(value: Mapping[str, Any]) -> dict[str, Any]:
    """``value`` itself when it is a dict (the usual case), else a dict of it."""
    return value if isinstance(value, dict) else dict(value)


# --------------------------------------------------------------------------- conversation reading


def _text_of(message: Mapping[str, Any]) -> str:
    """The text of a message whose content is a string or a list of parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def _last_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    return next((_text_of(m) for m in reversed(messages) if m.get("role") == "user"), "")


def _results_since_user(messages: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Tool name -> tool message content, for the calls made since the last user message."""
    start = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1) + 1
    names: dict[str, str] = {}
    results: dict[str, str] = {}
    for message in messages[start:]:
        for call in message.get("tool_calls") or ():
            names[call.get("id", "")] = call.get("function", {}).get("name", "")
        if message.get("role") == "tool":
            results[names.get(message.get("tool_call_id", ""), "")] = _text_of(message)
    return results


def _tool_names(tools: Sequence[Mapping[str, Any]]) -> list[str]:
    return [tool.get("function", {}).get("name", "") for tool in tools]


def _args(value: Mapping[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# --------------------------------------------------------------------------- TestModel


class TestModel(FunctionModel):
    """Calls every offered tool once, in one turn, then summarises the results.

    Arguments are made from each tool's ``inputSchema`` (see
    :mod:`yao_actors.models.schema_values`), the same ones for the same
    ``seed`` and tool name. When the last message is a tool result it answers
    with one line per result instead; with no tools it says so.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, *, seed: int = 0, chunk_size: int | None = None) -> None:
        super().__init__(self._answer, name="test model (offline stand-in)", chunk_size=chunk_size)
        self.seed = seed

    def arguments_for(self, tool: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments this model sends to ``tool`` (an OpenAI tool schema)."""
        function = tool.get("function", {})
        schema = function.get("parameters") or {"type": "object"}
        value = sample_value(schema, random.Random(f"{self.seed}:{function.get('name', '')}"))
        return value if isinstance(value, dict) else {}

    def _answer(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        if messages and messages[-1].get("role") == "tool":
            results = _results_since_user(messages)
            lines = [f"- {name}: {content}" for name, content in results.items()]
            return Completion(text=f"Called {len(results)} tool(s):\n" + "\n".join(lines))
        if not tools:
            return Completion(text="No tools were offered, so there is nothing to call.")
        turn = len(self.calls)
        calls = tuple(
            ToolCall(id=f"call_test_{turn}_{i}", name=name, arguments=_args(self.arguments_for(tool)))
            for i, (name, tool) in enumerate(zip(_tool_names(tools), tools, strict=True))
        )
        return Completion(tool_calls=calls, finish_reason="tool_calls")


# --------------------------------------------------------------------------- DemoModel

WEATHER_TOOL = "weather__get"
CLOTHING_TOOL = "clothing__advise"

#: Chinese name -> English name of the cities the demo weather server knows.
_CITIES: dict[str, str] = {
    "北京": "Beijing",
    "上海": "Shanghai",
    "广州": "Guangzhou",
    "深圳": "Shenzhen",
    "杭州": "Hangzhou",
    "哈尔滨": "Harbin",
    "东京": "Tokyo",
    "伦敦": "London",
    "纽约": "New York",
}
_CONDITIONS_ZH = {
    "sunny": "晴",
    "cloudy": "多云",
    "overcast": "阴",
    "light rain": "小雨",
    "snow": "雪",
    "windy": "有大风",
}
_TOPIC_WORDS_EN = ("weather", "wear", "cloth", "dress", "jacket", "coat", "temperature", "cold", "hot", "umbrella")
_TOPIC_WORDS_ZH = ("天气", "穿", "衣", "冷", "热", "温度", "气温", "伞", "下雨")
_CJK = re.compile(r"[\u4e00-\u9fff]")


def _find_city(question: str) -> str | None:
    """The English name of the first known city named in ``question`` (Chinese or English)."""
    lowered = question.casefold()
    found = [(lowered.find(name.casefold()), english) for name, english in _CITIES.items()]
    found += [(lowered.find(english.casefold()), english) for english in _CITIES.values()]
    hits = sorted((position, english) for position, english in found if position >= 0)
    return hits[0][1] if hits else None


def _on_topic(question: str) -> bool:
    lowered = question.casefold()
    return any(word in lowered for word in _TOPIC_WORDS_EN + _TOPIC_WORDS_ZH)


def _parsed(content: str | None) -> dict[str, Any] | None:
    """A tool result as an object, or ``None`` for an error or anything unexpected."""
    if content is None or content.startswith("Error:"):
        return None
    try:
        value = untrusted_json.loads(content)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class DemoModel(FunctionModel):
    """The ``demo`` model: a scripted stand-in that plays the seed's weather scenario.

    It reads the last user message and the tool results since then: a known
    city and a weather or clothing question make it call ``weather__get``,
    then ``clothing__advise`` with the returned temperature and wind, then
    answer in the user's language (Chinese or English) with both results. A
    failed tool is reported honestly; any other question gets a plain
    statement of what this demo can do. It is not a language model.
    """

    def __init__(self, *, chunk_size: int | None = 6) -> None:
        super().__init__(self._answer, name="demo (offline stand-in)", chunk_size=chunk_size)

    def _answer(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        question = _last_user_text(messages)
        zh = bool(_CJK.search(question))
        city = _find_city(question)
        if city is None or not _on_topic(question) or WEATHER_TOOL not in _tool_names(tools):
            return Completion(text=_capabilities(zh, city, WEATHER_TOOL in _tool_names(tools)))
        results = _results_since_user(messages)
        if WEATHER_TOOL not in results:
            return self._call(WEATHER_TOOL, {"city": city})
        weather = _parsed(results[WEATHER_TOOL])
        if weather is None:
            return Completion(text=_tool_failed(zh, city, WEATHER_TOOL, results[WEATHER_TOOL]))
        if CLOTHING_TOOL in _tool_names(tools) and CLOTHING_TOOL not in results:
            lang = "zh" if zh else "en"
            return self._call(CLOTHING_TOOL, {"temp": weather.get("temp"), "wind": weather.get("wind"), "lang": lang})
        return Completion(text=_answer(zh, city, weather, results.get(CLOTHING_TOOL)))

    def _call(self, tool: str, arguments: Mapping[str, Any]) -> Completion:
        call = ToolCall(id=f"call_demo_{len(self.calls)}", name=tool, arguments=_args(arguments))
        return Completion(tool_calls=(call,), finish_reason="tool_calls")


def _chinese_name(city: str) -> str:
    return next(chinese for chinese, english in _CITIES.items() if english == city)


def _capabilities(zh: bool, city: str | None, has_weather: bool) -> str:
    if not has_weather:
        if zh:
            return "我是离线演示模型，只会用 weather 和 clothing 演示工具回答天气和穿衣问题，但这次没有可用的天气工具。"
        return (
            "I am the offline demo model. I can only answer weather and clothing questions with the demo "
            "weather and clothing tools, and no weather tool is available here."
        )
    if zh:
        cities = "、".join(_CITIES)
        ask = "" if city is None else f"关于{_chinese_name(city)}，"
        return (
            f"我是离线演示模型，不是真正的语言模型。{ask}我只能回答某个城市今天的天气和穿衣建议，"
            f"例如「北京今天适合穿什么？」。我知道的城市：{cities}。"
        )
    cities = ", ".join(_CITIES.values())
    return (
        "I am the offline demo model, not a real language model. I can only tell you today's weather and "
        f'what to wear in one city, for example "What should I wear in Beijing today?". Cities I know: {cities}.'
    )


def _tool_failed(zh: bool, city: str, tool: str, content: str) -> str:
    if zh:
        return f"抱歉，查询{_chinese_name(city)}的天气失败了（{tool}：{content}），所以我给不出穿衣建议。"
    return f"Sorry, looking up the weather in {city} failed ({tool}: {content}), so I cannot advise on clothing."


def _answer(zh: bool, city: str, weather: Mapping[str, Any], clothing: str | None) -> str:
    temp, wind, condition = weather.get("temp"), weather.get("wind"), str(weather.get("condition", ""))
    advice = _parsed(clothing)
    if zh:
        head = f"{_chinese_name(city)}今天{_CONDITIONS_ZH.get(condition, condition)}，气温{temp}°C，风力{wind}级。"
        if advice is not None:
            return head + f"建议：{advice.get('advice', '')}"
        return head + ("穿衣建议工具出错了：" + clothing if clothing else "这次没有穿衣建议工具可用。")
    head = f"Today in {city}: {condition}, {temp}°C, wind force {wind}."
    if advice is not None:
        return head + f" Advice: {advice.get('advice', '')}"
    return head + (f" The clothing tool failed: {clothing}" if clothing else " No clothing tool is available here.")
