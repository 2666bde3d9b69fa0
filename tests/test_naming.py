"""Flat tool names: the seed's encode/parse table, and the mapping table's guarantees."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from yao_actors.errors import ConfigError
from yao_actors.tools.naming import (
    OPENAI_NAME,
    ToolNameTable,
    ToolRef,
    encode_tool_name,
    flat_tool_name,
    parse_tool_name,
)


@pytest.mark.parametrize(
    ("server", "tool", "expected"),
    [
        ("github.enterprise", "search", "github_enterprise__search"),
        ("echo", "ping", "echo__ping"),
        ("com.example.service", "list", "com_example_service__list"),
        ("my-server", "run", "my-server__run"),
        ("echo", "do__it", "echo__do__it"),
        ("a.", "t", "a___t"),
        ("", "x", ""),
        ("x", "", ""),
    ],
)
def test_encode_follows_the_seed(server: str, tool: str, expected: str) -> None:
    assert encode_tool_name(server, tool) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("echo__ping", ("echo", "ping", True)),
        ("github_enterprise__search", ("github.enterprise", "search", True)),
        ("com_example_service__list", ("com.example.service", "list", True)),
        ("my-server__run", ("my-server", "run", True)),
        ("echo___private", ("echo", "_private", True)),
        ("my_server__x", ("my.server", "x", True)),
        ("a___t", ("a", "_t", True)),
        ("echo__a.b", ("echo", "a.b", True)),
        ("echo_ping", ("", "", False)),
        ("__", ("", "", False)),
        ("echo__", ("", "", False)),
        ("__ping", ("", "", False)),
        ("a__b__c", ("", "", False)),
        ("a____b", ("", "", False)),
        ("", ("", "", False)),
    ],
)
def test_parse_follows_the_seed(name: str, expected: tuple[str, str, bool]) -> None:
    assert parse_tool_name(name) == expected


def test_the_table_reaches_what_the_seed_decoding_misroutes() -> None:
    refs = [ToolRef("my_server", "x"), ToolRef("my-server", "run"), ToolRef("echo", "do__it")]
    table = ToolNameTable.build(refs)
    assert table.resolve("my_server__x") == ToolRef("my_server", "x")
    assert table.resolve("my-server__run") == ToolRef("my-server", "run")
    assert table.resolve("echo__do__it") == ToolRef("echo", "do__it")
    assert table.resolve("echo__nope") is None


def test_collision_is_a_config_error_naming_both_sources() -> None:
    with pytest.raises(ConfigError) as caught:
        ToolNameTable.build([ToolRef("a.b", "x"), ToolRef("a_b", "x")])
    (problem,) = caught.value.problems
    assert "'a_b__x'" in problem
    assert "'a.b'" in problem
    assert "'a_b'" in problem


def test_the_same_tool_twice_is_not_a_collision() -> None:
    table = ToolNameTable.build([ToolRef("a", "x"), ToolRef("a", "x")])
    assert dict(table.names) == {"a__x": ToolRef("a", "x")}


@pytest.mark.parametrize(
    ("server", "tool"),
    [
        ("echo", "a.b"),
        ("svc", "tool with spaces/and:colons"),
        ("s" * 40, "t" * 40),
        ("天气", "查询"),
        ("echo", "x" * 200),
    ],
)
def test_illegal_names_are_sanitised_deterministically(server: str, tool: str) -> None:
    name = flat_tool_name(server, tool)
    assert OPENAI_NAME.fullmatch(name)
    assert name == flat_tool_name(server, tool)
    assert ToolNameTable.build([ToolRef(server, tool)]).resolve(name) == ToolRef(server, tool)


def test_shortened_names_of_distinct_tools_stay_distinct() -> None:
    long_server = "s" * 70
    assert flat_tool_name(long_server, "alpha") != flat_tool_name(long_server, "beta")
    assert flat_tool_name("echo", "a.b") != flat_tool_name("echo", "a_b")


def test_legal_names_are_left_as_the_seed_encodes_them() -> None:
    assert flat_tool_name("github.enterprise", "search") == "github_enterprise__search"


SEGMENT = st.text(alphabet="abcXYZ019-", min_size=1, max_size=8)
#: The seed's intended ids: segments joined by "." for servers, by single "_" for tools.
VALID_SERVER = st.lists(SEGMENT, min_size=1, max_size=4).map(".".join)
VALID_TOOL = st.lists(SEGMENT, min_size=1, max_size=3).map("_".join)
ANY_TEXT = st.text(min_size=1, max_size=80)


@given(VALID_SERVER, VALID_TOOL)
def test_round_trip_for_valid_ids(server: str, tool: str) -> None:
    assert parse_tool_name(encode_tool_name(server, tool)) == (server, tool, True)


@given(st.lists(st.tuples(ANY_TEXT, ANY_TEXT), max_size=30))
def test_table_names_are_legal_and_unique_or_refused(pairs: list[tuple[str, str]]) -> None:
    refs = [ToolRef(server, tool) for server, tool in pairs]
    names = [flat_tool_name(r.server, r.tool) for r in set(refs)]
    if len(names) != len(set(names)):
        # Two different tools really share a flat name: the table must refuse.
        with pytest.raises(ConfigError):
            ToolNameTable.build(refs)
        return
    table = ToolNameTable.build(refs)
    assert set(table.names.values()) == set(refs)
    for name, ref in table.names.items():
        assert OPENAI_NAME.fullmatch(name)
        assert table.resolve(name) == ref


@given(st.lists(st.tuples(VALID_SERVER, VALID_TOOL), max_size=30, unique=True))
def test_distinct_valid_tools_get_distinct_names(pairs: list[tuple[str, str]]) -> None:
    refs = [ToolRef(server, tool) for server, tool in pairs]
    table = ToolNameTable.build(refs)
    assert list(table.names.values()) == refs


def test_a_tool_name_ending_in_a_newline_is_made_legal_not_passed_on() -> None:
    """``$`` matches before a final newline: a server's ``"get\\n"`` must not reach the model as a name."""
    name = flat_tool_name("srv", "get\n")
    assert "\n" not in name
    assert OPENAI_NAME.fullmatch(name)
    assert name != flat_tool_name("srv", "get")
