"""The seed's weather MCP server: ``get(city)`` from a deterministic built-in table.

Runnable over stdio (``python -m yao_actors.demo.weather``); ``build_server()``
gives the same server for in-process use. No network: the table below is the
whole world, so the demo and the tests see the same answers every time.
"""

from __future__ import annotations

from typing import Literal, TypedDict

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

Condition = Literal["sunny", "cloudy", "overcast", "light rain", "snow", "windy"]


class Weather(TypedDict):
    """Current weather of one city."""

    city: str
    temp: int
    wind: int
    condition: Condition


#: English name -> (Chinese name, temperature °C, wind Beaufort level, condition).
_TABLE: dict[str, tuple[str, int, int, Condition]] = {
    "Beijing": ("北京", 3, 4, "sunny"),
    "Shanghai": ("上海", 12, 3, "cloudy"),
    "Guangzhou": ("广州", 22, 2, "light rain"),
    "Shenzhen": ("深圳", 24, 3, "overcast"),
    "Hangzhou": ("杭州", 10, 2, "light rain"),
    "Harbin": ("哈尔滨", -18, 3, "snow"),
    "Tokyo": ("东京", 9, 5, "windy"),
    "London": ("伦敦", 7, 4, "overcast"),
    "New York": ("纽约", 1, 6, "windy"),
}

_LOOKUP: dict[str, str] = {
    key: english for english, (chinese, *_rest) in _TABLE.items() for key in (english.casefold(), chinese)
}

CITIES: tuple[str, ...] = tuple(f"{english} ({row[0]})" for english, row in _TABLE.items())


def lookup(city: str) -> Weather:
    """The weather of ``city`` (English, any case, or Chinese); ``ToolError`` naming the known cities otherwise."""
    english = _LOOKUP.get(city.strip().casefold())
    if english is None:
        raise ToolError(f"unknown city {city!r}; known cities: {', '.join(CITIES)}")
    _chinese, temp, wind, condition = _TABLE[english]
    return Weather(city=english, temp=temp, wind=wind, condition=condition)


def build_server() -> MCPServer:
    """A fresh weather server (one per client in process; the stdio entry point runs one too)."""
    server = MCPServer("weather", instructions="Current weather of a few well-known cities.")

    @server.tool(
        description=(
            "Get the current weather of a city. Returns the city's English name, the temperature in "
            "degrees Celsius (temp), the wind force on the Beaufort scale (wind, 0-12) and a short "
            f"condition. Accepts English or Chinese city names. Known cities: {', '.join(CITIES)}."
        )
    )
    def get(city: str) -> Weather:
        return lookup(city)

    return server


if __name__ == "__main__":
    build_server().run()
