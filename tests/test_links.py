"""Resource links and embedded resources in tool results, as the model sees them (issue 33)."""

from __future__ import annotations

import attrs

from yao_actors.tools.links import without_links
from yao_actors.tools.results import ToolCallResult, compact_json, tool_message_content

LINK = {"type": "resource_link", "uri": "file:///r.txt", "name": "r.txt", "title": "Report", "mimeType": "text/plain",
        "size": 1258291, "description": "the long description is left out"}  # fmt: skip


def test_a_link_is_a_short_reference() -> None:
    assert without_links(LINK) == "[link: Report <file:///r.txt>, text/plain, 1.2 MB]"
    assert without_links({"type": "resource_link", "uri": "x://y"}) == "[link: <x://y>]"


def test_an_embedded_resource_is_its_text_or_a_placeholder() -> None:
    embedded = {"uri": "x://a", "mimeType": "text/plain", "text": "hello"}
    binary = {"uri": "x://b", "mimeType": "application/zip", "blob": "QUJD"}
    assert without_links(["see", embedded, binary]) == [
        "see",
        "hello",
        "[resource <x://b>, application/zip, 3 B, not shown]",
    ]


def test_json_that_only_looks_alike_is_left_alone() -> None:
    value = [{"uri": "x://a", "text": "t", "score": 3}, {"type": "resource_link"}]
    assert without_links(value) is value
    result = ToolCallResult("c", "s__t", "s", "t", "{}", result=["x", LINK], rich=True)
    assert tool_message_content(result) == '["x","[link: Report <file:///r.txt>, text/plain, 1.2 MB]"]'
    text_only = attrs.evolve(result, rich=False)  # a JSON text that looks like a link is the tool's data
    assert tool_message_content(text_only) == compact_json(["x", LINK])
