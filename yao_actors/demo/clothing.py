"""The seed's clothing MCP server: ``advise(temp, wind, lang)`` by fixed rules.

Runnable over stdio (``python -m yao_actors.demo.clothing``); ``build_server()``
gives the same server for in-process use. The advice is a deterministic function
of temperature bands and wind force, in English or Chinese.
"""

from __future__ import annotations

from typing import Literal, TypedDict

from mcp.server.mcpserver import MCPServer

Lang = Literal["en", "zh"]

#: (lower bound °C inclusive, English advice, Chinese advice), warmest first.
_BANDS: tuple[tuple[float, str, str], ...] = (
    (28, "Wear light, breathable clothes: a T-shirt and shorts.", "穿轻薄透气的衣服：T恤和短裤。"),
    (20, "Wear a shirt or a thin long-sleeved top.", "穿衬衫或薄长袖上衣。"),
    (12, "Wear a sweater or a light jacket.", "穿毛衣或薄外套。"),
    (5, "Wear a warm coat over a sweater.", "穿毛衣，外加保暖外套。"),
    (-5, "Wear a thick down jacket, a hat and gloves.", "穿厚羽绒服，戴帽子和手套。"),
    (
        float("-inf"),
        "Wear thermal underwear, a heavy down coat, a hat, a scarf and gloves.",
        "穿保暖内衣和厚羽绒服，戴帽子、围巾和手套。",
    ),
)

_WINDPROOF = {"en": "It is windy: add a windproof outer layer.", "zh": "风大：再加一件防风外套。"}

#: Beaufort level from which a windproof layer is advised.
WINDY = 5


class Advice(TypedDict):
    """What to wear."""

    advice: str


def advise(temp: float, wind: float, lang: Lang = "en") -> Advice:
    """Clothing advice for ``temp`` °C and Beaufort ``wind``, in ``lang``."""
    index = 1 if lang == "en" else 2
    band = next(row for row in _BANDS if temp >= row[0])
    parts = [str(band[index])]
    if wind >= WINDY:
        parts.append(_WINDPROOF[lang])
    return Advice(advice=("" if lang == "zh" else " ").join(parts))


def build_server() -> MCPServer:
    """A fresh clothing server (one per client in process; the stdio entry point runs one too)."""
    server = MCPServer("clothing", instructions="Clothing advice for a temperature and a wind force.")

    @server.tool(
        name="advise",
        description=(
            "Advise what to wear for a temperature in degrees Celsius (temp) and a wind force on the "
            "Beaufort scale (wind, 0-12). lang chooses the language of the advice: 'en' (English, the "
            "default) or 'zh' (Chinese). Returns {'advice': text}."
        ),
    )
    def advise_tool(temp: float, wind: float, lang: Lang = "en") -> Advice:
        return advise(temp, wind, lang)

    return server


if __name__ == "__main__":
    build_server().run()
