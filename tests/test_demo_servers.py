"""The demo weather and clothing MCP servers: their table, their rules, their schemas, and their stdio entry points."""

from __future__ import annotations

import sys

import pytest
import trio

from tests.integration.actor_checks import running
from yao_actors.config import Config, InMemoryTransport, ServerSpec, StdioTransport
from yao_actors.demo import clothing, weather
from yao_actors.errors import ErrorKind
from yao_actors.runtime import open_runtime
from yao_actors.tools.server_actor import ServerHandle


def spec(module: object, server_id: str) -> ServerSpec:
    return ServerSpec(id=server_id, transport=InMemoryTransport(module.build_server()))  # type: ignore[attr-defined]


@pytest.mark.parametrize("city", ["Beijing", "beijing", "  BEIJING ", "北京"])
async def test_weather_of_beijing_in_any_spelling(city: str) -> None:
    async with running(spec(weather, "weather")) as handle:
        outcome = await handle.call_tool("get", {"city": city})
    assert outcome.result == {"city": "Beijing", "temp": 3, "wind": 4, "condition": "sunny"}


async def test_weather_table_is_complete_and_consistent() -> None:
    names = {
        "Shanghai": "上海", "Guangzhou": "广州", "Shenzhen": "深圳", "Hangzhou": "杭州", "Harbin": "哈尔滨",
        "Tokyo": "东京", "London": "伦敦", "New York": "纽约",
    }  # fmt: skip
    conditions = {"sunny", "cloudy", "overcast", "light rain", "snow", "windy"}
    async with running(spec(weather, "weather")) as handle:
        for english, chinese in names.items():
            by_english = await handle.call_tool("get", {"city": english.lower()})
            by_chinese = await handle.call_tool("get", {"city": chinese})
            assert by_english.result == by_chinese.result
            assert by_english.result["city"] == english
            assert isinstance(by_english.result["temp"], int)
            assert 0 <= by_english.result["wind"] <= 12
            assert by_english.result["condition"] in conditions


async def test_unknown_city_is_a_tool_error_naming_the_known_cities() -> None:
    async with running(spec(weather, "weather")) as handle:
        outcome = await handle.call_tool("get", {"city": "Atlantis"})
    assert outcome.kind is ErrorKind.TOOL_ERROR
    assert outcome.retryable
    for city in ("Atlantis", "Beijing (北京)", "New York (纽约)", "Harbin"):
        assert city in (outcome.error or "")


async def test_tools_describe_themselves() -> None:
    async with running(spec(weather, "weather")) as w, running(spec(clothing, "clothing")) as c:
        (get,) = await w.list_tools()
        (advise,) = await c.list_tools()
    assert get.name == "get"
    assert get.input_schema["required"] == ["city"]
    assert "Celsius" in (get.description or "")
    assert "北京" in (get.description or "")
    assert advise.name == "advise"
    assert advise.input_schema["required"] == ["temp", "wind"]
    assert advise.input_schema["properties"]["lang"]["enum"] == ["en", "zh"]
    assert "Beaufort" in (advise.description or "")


@pytest.mark.parametrize(
    ("temp", "wind", "lang", "expected"),
    [
        (30, 1, "en", "T-shirt"),
        (22, 1, "en", "shirt"),
        (15, 2, "en", "sweater or a light jacket"),
        (8, 4, "en", "warm coat"),
        (3, 4, "en", "down jacket"),
        (-18, 3, "en", "thermal underwear"),
        (-25, 3, "en", "thermal underwear"),
        (8, 4, "zh", "保暖外套"),
    ],
)
def test_clothing_follows_the_temperature_bands(temp: float, wind: float, lang: clothing.Lang, expected: str) -> None:
    advice = clothing.advise(temp, wind, lang)["advice"]
    assert expected in advice
    assert ("windproof" in advice) is False
    assert ("防风" in advice) is False


@pytest.mark.parametrize(("wind", "windy"), [(4, False), (5, True), (8, True)])
def test_strong_wind_adds_a_windproof_layer(wind: float, windy: bool) -> None:
    assert ("windproof" in clothing.advise(10, wind)["advice"]) is windy
    assert ("防风" in clothing.advise(10, wind, "zh")["advice"]) is windy


async def test_clothing_over_mcp_defaults_to_english() -> None:
    async with running(spec(clothing, "clothing")) as handle:
        english = await handle.call_tool("advise", {"temp": 3, "wind": 6})
        chinese = await handle.call_tool("advise", {"temp": 3, "wind": 6, "lang": "zh"})
        wrong = await handle.call_tool("advise", {"temp": 3, "wind": 6, "lang": "fr"})
    assert english.result == {
        "advice": "Wear a thick down jacket, a hat and gloves. It is windy: add a windproof outer layer."
    }
    assert chinese.result == {"advice": "穿厚羽绒服，戴帽子和手套。风大：再加一件防风外套。"}
    assert wrong.kind is ErrorKind.TOOL_ERROR


async def test_the_seed_scenario_over_stdio() -> None:
    """Both demo servers as real subprocesses, the way the embedded default runs them."""

    def stdio(module: str) -> StdioTransport:
        return StdioTransport(command=sys.executable, args=("-m", f"yao_actors.demo.{module}"))

    servers = {name: ServerSpec(id=name, transport=stdio(name)) for name in ("weather", "clothing")}
    with trio.fail_after(60):
        async with open_runtime(Config(servers=servers)) as runtime:
            w: ServerHandle = runtime.servers["weather"]
            forecast = await w.call_tool("get", {"city": "北京"})
            assert forecast.ok, forecast
            advice = await runtime.servers["clothing"].call_tool(
                "advise", {"temp": forecast.result["temp"], "wind": forecast.result["wind"], "lang": "zh"}
            )
    assert advice.result == {"advice": "穿厚羽绒服，戴帽子和手套。"}
