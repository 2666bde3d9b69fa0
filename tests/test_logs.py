"""Log records: a run's carry its ids, the JSON format is one object per line, the text format shows the fields."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
import trio

from tests.test_tracing import config
from yao_actors.models import Completion, FunctionModel
from yao_actors.observability.logs import configure_logging, record_fields
from yao_actors.runtime import open_runtime
from yao_actors.transports import sdk_errors
from yao_actors.transports.sdk_errors import sdk_errors_in_one_line


@pytest.fixture
def root_logging() -> Iterator[None]:
    """Restore the root logger's handlers and level after the test."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(level)


async def _run_logging_inside(out: io.StringIO, fmt: str) -> tuple[str, str]:
    configure_logging("INFO", fmt, stream=out)  # type: ignore[arg-type]

    def fn(messages: object, tools: object) -> Completion:
        logging.getLogger("users.model").warning("thinking about %s", "北京")
        return Completion(text="晴")

    with trio.fail_after(30):
        async with open_runtime(config("mine"), models={"mine": FunctionModel(fn, name="mine")}) as runtime:
            result = await runtime.run("helper", "北京今天适合穿什么?", thread_id="t-7")
    return result.run_id, result.thread_id


@pytest.mark.usefixtures("root_logging")
async def test_json_lines_carry_the_run_ids_even_from_code_that_never_saw_them() -> None:
    out = io.StringIO()
    run_id, thread_id = await _run_logging_inside(out, "json")
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    by_message = {record["message"]: record for record in records}
    started, ended, inner = (
        by_message["run started"],
        by_message["run ended: answered"],
        by_message["thinking about 北京"],
    )
    for record in (started, ended, inner):
        assert (record["run_id"], record["thread_id"]) == (run_id, thread_id)
    assert inner["logger"] == "users.model"
    assert inner["level"] == "WARNING"
    assert ended["outcome"] == "answered"
    assert ended["assistant"] == "helper"
    assert ended["duration"] >= 0
    assert (ended["input_tokens"], ended["output_tokens"]) == (0, 0)
    ready = [record for record in records if record.get("server") == "test" and record.get("state") == "ready"]
    assert len(ready) == 1
    assert "run_id" not in ready[0]  # a server's record is about the server, not a run


@pytest.mark.usefixtures("root_logging")
async def test_the_text_format_puts_the_fields_after_the_message() -> None:
    out = io.StringIO()
    run_id, _ = await _run_logging_inside(out, "text")
    line = next(line for line in out.getvalue().splitlines() if "run ended" in line)
    assert " INFO yao_actors.observability.runs: run ended: answered " in line
    assert f"run_id={run_id}" in line
    assert "thread_id=t-7" in line


def test_an_unknown_level_or_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown log level 'LOUD'"):
        configure_logging("LOUD")
    with pytest.raises(ValueError, match="unknown log format 'xml'"):
        configure_logging("INFO", "xml")  # type: ignore[arg-type]


def test_the_sdk_transport_errors_of_a_connection_of_ours_are_one_line(caplog: pytest.LogCaptureFixture) -> None:
    sdk = logging.getLogger("mcp.client.sse")
    sdk_errors.install()
    try:
        raise ConnectionError("peer closed\nthe stream")
    except ConnectionError:
        with (
            caplog.at_level(logging.DEBUG),
            caplog.at_level(logging.DEBUG, logger="mcp.client.sse"),  # configure_logging may have raised "mcp"'s
            sdk_errors_in_one_line("legacy"),
        ):
            sdk.exception("Error in sse_reader")
            sdk.debug("Received SSE event: message")  # below WARNING: the SDK's own, as it was
        sdk.exception("Error in sse_reader")  # not one of our connections: untouched
    ours, in_full, debug, theirs = caplog.records
    assert (ours.name, ours.levelname, ours.getMessage(), ours.exc_info) == (
        "yao_actors.transports.sdk_errors",
        "WARNING",
        "server 'legacy': the MCP SDK reports: Error in sse_reader: ConnectionError: peer closed the stream",
        None,
    )
    assert record_fields(ours) == {"server": "legacy", "sdk_logger": "mcp.client.sse"}
    assert (in_full.levelname, in_full.exc_info is not None) == ("DEBUG", True)
    assert (debug.name, debug.levelname) == ("mcp.client.sse", "DEBUG")
    assert (theirs.name, theirs.levelname, theirs.exc_info is not None) == ("mcp.client.sse", "ERROR", True)
