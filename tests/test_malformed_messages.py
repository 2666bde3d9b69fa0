"""A stdio line the SDK cannot parse fails the request it answers (:mod:`yao_actors.transports.malformed`)."""

from __future__ import annotations

import mcp.types
import pydantic
import pytest
from mcp.shared.message import SessionMessage

from yao_actors.transports.malformed import MALFORMED, unparsed

DEEP = b'{"a":' * 900 + b"1" + b"}" * 900


def parse_error(line: bytes) -> ValueError:
    try:
        mcp.types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except pydantic.ValidationError as exc:
        return exc
    raise AssertionError("the line parsed")


@pytest.mark.parametrize(
    ("line", "request_id", "reason"),
    [
        (b'{"jsonrpc":"2.0","id":7,"result":{"structuredContent":' + DEEP + b"}}", 7, "recursion limit exceeded"),
        (b'{"jsonrpc":"2.0","id":"r-1","result":{"text":"\\ud800"}}', "r-1", "hex escape"),
        (b'{"jsonrpc": "2.0", "id" : 3 , "error": {"code": "x"}}', 3, "not a JSON-RPC message"),
        (b'{"jsonrpc":"2.0","id":4,"result":5}', 4, "not a JSON-RPC message"),
    ],
)
def test_a_response_that_cannot_be_parsed_fails_its_request(line: bytes, request_id: object, reason: str) -> None:
    message = unparsed(line, parse_error(line), "'srv'")
    assert isinstance(message, SessionMessage)
    error = message.message
    assert isinstance(error, mcp.types.JSONRPCError)
    assert (error.id, error.error.code, error.error.message) == (request_id, mcp.types.PARSE_ERROR, MALFORMED)
    assert reason in str(error.error.data)


@pytest.mark.parametrize(
    "line",
    [
        b'{"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":' + DEEP + b"}",  # a request: not ours to fail
        b'{"jsonrpc":"2.0","method":"notifications/message","params":{"x":"\\ud800"}}',
        b'{"jsonrpc":"2.0","result":{"id":5,"x":"\\ud800"},"id":6}',  # its id after its result: not looked for
        b'{"jsonrpc":"2.0","id":1.5,"result":{"x":"\\ud800"}}',
        b'[{"id":1,"result":"\\ud800"}]',
        b"not json at all",
    ],
)
def test_anything_else_is_passed_on_as_its_parse_error(line: bytes) -> None:
    error = parse_error(line)
    assert unparsed(line, error, "'srv'") is error
