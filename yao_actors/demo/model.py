"""The ``demo`` model: an offline stand-in that plays the seed's scenario against the demo servers.

It knows the tools of :mod:`yao_actors.demo.weather` and
:mod:`yao_actors.demo.clothing` (weather, then clothing advice, then an answer
in the user's language) and says plainly what it can do for anything else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from yao_actors.models.base import Completion, ToolCall
from yao_actors.models.offline import (
    KEPT_CALLS,
    FunctionModel,
    compact_args,
    last_user_text,
    results_since_user,
    tool_names,
)
from yao_actors.untrusted import json as untrusted_json

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
    """The ``demo`` model: a scripted stand-in that plays the weather-and-clothing scenario.

    It reads the last user message and the tool results since then: a known
    city and a weather or clothing question make it call ``weather__get``,
    then ``clothing__advise`` with the returned temperature and wind, then
    answer in the user's language (Chinese or English) with both results. A
    failed tool is reported honestly; any other question gets a plain
    statement of what this demo can do. It is not a language model.
    """

    def __init__(self, *, chunk_size: int | None = 6, keep_calls: int | None = KEPT_CALLS) -> None:
        super().__init__(self._answer, name="demo (offline stand-in)", chunk_size=chunk_size, keep_calls=keep_calls)

    def _answer(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        question = last_user_text(messages)
        zh = bool(_CJK.search(question))
        city = _find_city(question)
        if city is None or not _on_topic(question) or WEATHER_TOOL not in tool_names(tools):
            return Completion(text=_capabilities(zh, city, WEATHER_TOOL in tool_names(tools)))
        results = results_since_user(messages)
        if WEATHER_TOOL not in results:
            return self._call(WEATHER_TOOL, {"city": city})
        weather = _parsed(results[WEATHER_TOOL])
        if weather is None:
            return Completion(text=_tool_failed(zh, city, WEATHER_TOOL, results[WEATHER_TOOL]))
        if CLOTHING_TOOL in tool_names(tools) and CLOTHING_TOOL not in results:
            lang = "zh" if zh else "en"
            return self._call(CLOTHING_TOOL, {"temp": weather.get("temp"), "wind": weather.get("wind"), "lang": lang})
        return Completion(text=_answer(zh, city, weather, results.get(CLOTHING_TOOL)))

    def _call(self, tool: str, arguments: Mapping[str, Any]) -> Completion:
        call = ToolCall(id=f"call_demo_{self.call_count}", name=tool, arguments=compact_args(arguments))
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
