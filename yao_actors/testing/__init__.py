"""Test doubles for users' own tests: offline models, a fake OpenAI-compatible endpoint, the test MCP server and its
launchers (stdio spec, streamable HTTP process), the tasks-extension test server's HTTP launcher, and a real ``redis-server`` on a free loopback port."""

from typing import Any

from yao_actors.demo.model import DemoModel
from yao_actors.models.offline import FunctionModel, RecordedCall, TestModel
from yao_actors.testing.fake_openai import FakeOpenAI, FakeToolCall, RecordedRequest, Reply, open_fake_openai
from yao_actors.testing.processes import (
    TASK_SERVER_COMMAND,
    TEST_SERVER_COMMAND,
    HttpTestServer,
    open_http_task_server,
    open_http_test_server,
    read_line,
    stdio_test_server,
)
from yao_actors.testing.redis_server import RedisServer


def __getattr__(name: str) -> Any:
    # Imported on first use: the test server also runs as ``python -m yao_actors.testing.servers``,
    # and importing it here would make runpy warn that it was already imported.
    if name == "build_test_server":
        from yao_actors.testing.servers import build_test_server

        return build_test_server
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "TASK_SERVER_COMMAND",
    "TEST_SERVER_COMMAND",
    "DemoModel",
    "FakeOpenAI",
    "FakeToolCall",
    "FunctionModel",
    "HttpTestServer",
    "RecordedCall",
    "RecordedRequest",
    "RedisServer",
    "Reply",
    "TestModel",
    "build_test_server",
    "open_fake_openai",
    "open_http_task_server",
    "open_http_test_server",
    "read_line",
    "stdio_test_server",
]
