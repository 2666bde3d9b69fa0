"""The schema gate: references only inside the document, patterns on RE2, flat questions, defaults filled — and
no other module of the package builds a jsonschema validator."""

from __future__ import annotations

import ast
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import mcp.types
import pytest
import trio

from yao_actors.tools import schema_gate
from yao_actors.tools.input_requests import InputAnswer, elicit_result, input_round
from yao_actors.tools.question_schemas import fill_defaults, question_problem
from yao_actors.tools.results import call_outcome
from yao_actors.tools.schema_gate import (
    answer_problem,
    compiled_validator,
    gate,
    schema_problems,
    tool_schema_notes,
)

PACKAGE = Path(schema_gate.__file__).resolve().parents[1]


def value_schema(value: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"value": value}, **more}


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A listening loopback socket: a fetch of a URL naming it would leave a connection to accept."""
    with socket.create_server(("127.0.0.1", 0)) as sock:
        sock.setblocking(False)
        yield sock


def connections(sock: socket.socket) -> int:
    count = 0
    while True:
        try:
            sock.accept()[0].close()
        except BlockingIOError:
            return count
        count += 1


def test_references_inside_the_document_resolve_and_are_enforced() -> None:
    by_pointer = {"$defs": {"city": {"type": "string"}}, **value_schema({"$ref": "#/$defs/city"})}
    by_anchor = {"$defs": {"city": {"$anchor": "city", "type": "string"}}, **value_schema({"$ref": "#city"})}
    embedded = {
        "$id": "https://example.invalid/root.json",
        "$defs": {"city": {"$id": "city.json", "type": "string"}},
        **value_schema({"$ref": "city.json"}),
    }
    draft7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": {"city": {"type": "string"}},
        **value_schema({"$ref": "#/definitions/city"}),
    }
    for schema in (by_pointer, by_anchor, embedded, draft7):
        assert gate(schema).notes == ()
        assert schema_problems({"value": 3}, schema) == ("value: 3 is not of type 'string'",)
        assert schema_problems({"value": "Paris"}, schema) == ()


@pytest.mark.parametrize(
    "ref",
    [
        "http://127.0.0.1:{port}/secret.json",
        "http://127.0.0.1:{port}/schema.json#/$defs/x",
        "file://{file}",
        "other.json",
        "https://json-schema.org/draft/2020-12/schema",  # even one jsonschema has at hand: outside the document
        "#/$defs/missing",
    ],
)
def test_a_reference_outside_the_document_is_refused_without_any_fetch(
    ref: str, listener: socket.socket, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text('{"const": "FILE-SECRET-7"}', encoding="utf-8")
    ref = ref.format(port=listener.getsockname()[1], file=secret)
    schema = value_schema({"$ref": ref})
    gated = gate(schema)
    assert gated.validator is None
    assert gated.problem == f"$ref {ref!r} is not followed: only references inside the schema resolve"
    assert schema_problems({"value": 1}, schema) == ()  # not enforced: the server judges
    assert connections(listener) == 0


async def test_a_catastrophic_pattern_is_checked_at_once_on_re2() -> None:
    schema = value_schema({"type": "string", "pattern": "^(a+)+$"})
    doomed = "a" * 40 + "!"
    with trio.fail_after(10):  # a hang guard: a backtracking engine would take days
        problems = await trio.to_thread.run_sync(schema_problems, {"value": doomed}, schema, abandon_on_cancel=True)
        answered = await trio.to_thread.run_sync(answer_problem, {"value": doomed}, schema, abandon_on_cancel=True)
    assert problems == (f"value: {doomed!r} does not match '^(a+)+$'",)
    assert answered == ("value", f"{doomed!r} does not match '^(a+)+$'")
    assert schema_problems({"value": "aaaa"}, schema) == ()


async def test_every_keyword_that_matches_names_runs_on_re2_too() -> None:
    slow = "^(a+)+$"
    schema = {
        "type": "object",
        "patternProperties": {slow: {"type": "integer"}},
        "additionalProperties": False,
        "propertyNames": {"pattern": slow},
    }
    doomed = "a" * 40 + "!"
    with trio.fail_after(10):  # a hang guard: a backtracking engine would take days on each name
        problems = await trio.to_thread.run_sync(schema_problems, {doomed: 1}, schema, abandon_on_cancel=True)
    assert problems == (
        f"{doomed!r} does not match '^(a+)+$'",
        f"'{doomed}' does not match any of the regexes: '^(a+)+$'",
    )
    assert schema_problems({"aaa": 1}, schema) == ()
    assert schema_problems({"aaa": "1"}, schema) == ("aaa: '1' is not of type 'integer'",)


def test_a_pattern_re2_refuses_is_not_enforced_and_said_once() -> None:
    schema = value_schema({"type": "string", "pattern": "(a)\\1"}, patternProperties={"(?=x)": {}})
    gated = gate(schema)
    assert gated.validator is not None
    assert gated.unenforced == (
        "pattern '(?=x)' is not enforced: invalid perl operator: (?=",
        "pattern '(a)\\\\1' is not enforced: invalid escape sequence: \\1",
    )
    assert schema_problems({"value": "zz"}, schema) == ()
    tool = mcp.types.Tool(name="t", input_schema=schema)
    assert tool_schema_notes(tool) == tuple(f"inputSchema {note}" for note in gated.unenforced)


def test_what_jsonschema_would_run_on_re_is_refused_or_left_out() -> None:
    nested = value_schema({"$schema": "http://json-schema.org/draft-07/schema#", "pattern": "^(a+)+$"})
    assert gate(nested).problem == (
        "a nested $schema ('http://json-schema.org/draft-07/schema#') is not supported: one dialect per schema"
    )
    unevaluated = {"patternProperties": {"^a": {}}, "unevaluatedProperties": False}
    assert gate(unevaluated).unenforced == ("unevaluatedProperties is not enforced beside patternProperties",)
    assert schema_problems({"b": 1}, unevaluated) == ()


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        ({"type": 12}, "not a valid JSON Schema: 12 is not valid under any of the given schemas"),
        ({"$schema": {}}, "$schema is not a string"),
        ([1], "a schema is a JSON object, not list"),
    ],
)
def test_a_schema_that_cannot_be_compiled_is_a_problem_not_an_error(schema: Any, problem: str) -> None:
    assert gate(schema).problem == problem
    assert schema_problems({"a": 1}, schema) == ()


def test_a_schema_nested_too_deep_is_a_problem_not_an_error() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(5000):
        node["items"] = {}
        node = node["items"]
    assert gate(deep).problem == "the schema is nested too deep to read"


def test_each_schema_is_compiled_once() -> None:
    schema = value_schema({"type": "string"}, required=["value"])
    first = compiled_validator(schema)
    assert first is not None
    assert compiled_validator(schema) is first
    assert compiled_validator(dict(reversed(schema.items()))) is first


FLAT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 1, "format": "email"},
        "guests": {"type": "integer", "minimum": 1, "maximum": 8, "default": 2},
        "breakfast": {"type": "boolean", "default": False},
        "seat": {"type": "string", "enum": ["window", "aisle"], "enumNames": ["Window", "Aisle"]},
        "size": {"type": "string", "oneOf": [{"const": "S", "title": "Small"}, {"const": "L", "title": "Large"}]},
        "extras": {"type": "array", "items": {"type": "string", "enum": ["wifi", "parking"]}, "default": ["wifi"]},
        "titled": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "A"}]}, "maxItems": 1},
    },
    "required": ["name"],
}


def test_a_flat_question_is_asked() -> None:
    assert question_problem(FLAT) is None
    assert question_problem(None) is None


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        (
            {"type": "object", "properties": {"address": {"type": "object", "properties": {}}}},
            "field 'address': 'properties' is not allowed in a question's field (only flat primitives)",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "object"}}},
            "field 'a': type 'object' is not a string, number, integer, boolean or a list of choices",
        ),
        (
            {"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/x"}}},
            "field 'a': '$ref' is not allowed in a question's field (only flat primitives)",
        ),
        (
            {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "object"}}}},
            "field 'a': a list field's items must be a string enum, or anyOf {'const', 'title'} choices",
        ),
        (
            {"type": "object", "$defs": {}, "properties": {}},
            "the requested schema has '$defs': only flat fields may be asked for",
        ),
        ({"type": "array"}, "the requested schema's type must be 'object'"),
    ],
)
def test_a_question_that_is_not_flat_is_declined(schema: dict[str, Any], problem: str) -> None:
    assert question_problem(schema) == problem


def test_a_2026_input_round_with_a_nested_question_is_declined_with_the_reason() -> None:
    nested = {"type": "object", "properties": {"a": {"type": "object", "properties": {}}}}
    params = mcp.types.ElicitRequestFormParams(message="Tell me", requested_schema=nested)
    result = mcp.types.InputRequiredResult(input_requests={"q": mcp.types.ElicitRequest(params=params)})
    assert input_round("s", "t", {}, result) == (
        "the client declines the question: field 'a': 'properties' is not allowed in a question's field "
        "(only flat primitives)"
    )


def test_an_answer_with_an_object_value_names_the_field() -> None:
    assert answer_problem({"name": {"first": "Ann"}}, FLAT) == (
        "name",
        "an answer's fields are strings, numbers, booleans or lists of choices, not objects",
    )
    assert answer_problem({"name": "ann@example.com", "extras": [{"a": 1}]}, FLAT)[0] == "extras"  # type: ignore[index]
    assert answer_problem({"name": "not an address"}, FLAT) == ("name", "'not an address' is not a 'email'")
    assert answer_problem({"name": "ann@example.com", "extras": ["wifi"]}, FLAT) is None


def test_the_defaults_of_left_out_fields_are_filled_where_answers_are_sent() -> None:
    assert fill_defaults({"name": "Ann", "guests": 4}, FLAT) == {
        "name": "Ann",
        "guests": 4,
        "breakfast": False,
        "extras": ["wifi"],
    }
    sent = elicit_result(InputAnswer("accept", {"name": "Ann"}), FLAT)
    assert sent.content == {"name": "Ann", "guests": 2, "breakfast": False, "extras": ["wifi"]}
    assert elicit_result(InputAnswer("decline"), FLAT).content is None


#: The modules that may use jsonschema: the gate, and the schemas that are ours (configuration, websocket frames).
ALLOWED = {"tools/schema_gate.py", "config/schema.py", "service/protocol.py"}


def _validator_uses(path: Path) -> list[str]:
    """Where a module imports jsonschema (how a validator is built: ``validate``, ``validators.create``, ...) or
    names a validator class or ``validator_for``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [f"line {node.lineno}: imports {m}" for m in modules if m.split(".")[0] == "jsonschema"]
        name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
        if (name.startswith("Draft") and name.endswith("Validator")) or name == "validator_for":
            found.append(f"line {node.lineno}: {name}")
    return found


def test_nothing_but_the_gate_builds_a_validator_from_a_servers_schema() -> None:
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        if where not in ALLOWED and (uses := _validator_uses(path)):
            offenders[where] = uses
    assert offenders == {}
    assert _validator_uses(PACKAGE / "tools/schema_gate.py")  # the walk does see a use
    assert jsonschema.Draft202012Validator  # what it looks for exists


def test_an_output_schema_that_cannot_be_enforced_takes_the_result_as_it_comes() -> None:
    output = {"type": "object", "properties": {"temp": {"$ref": "http://127.0.0.1:9/temp.json"}}}
    tool = mcp.types.Tool(name="t", input_schema={"type": "object"}, output_schema=output)
    assert tool_schema_notes(tool) == (
        "outputSchema not checked here ($ref 'http://127.0.0.1:9/temp.json' is not followed: only references "
        "inside the schema resolve)",
    )
    result = mcp.types.CallToolResult(content=[], structured_content={"temp": "warm"})
    outcome = call_outcome(result, output, 0.0)
    assert (outcome.ok, outcome.result, outcome.structured) == (True, {"temp": "warm"}, True)
