"""Test doubles for users' own tests: offline models and a fake OpenAI-compatible endpoint."""

from yao_actors.models.offline import DemoModel, FunctionModel, RecordedCall, TestModel
from yao_actors.testing.fake_openai import FakeOpenAI, FakeToolCall, RecordedRequest, Reply, open_fake_openai
from yao_actors.testing.servers import build_test_server

__all__ = [
    "DemoModel",
    "FakeOpenAI",
    "FakeToolCall",
    "FunctionModel",
    "RecordedCall",
    "RecordedRequest",
    "Reply",
    "TestModel",
    "build_test_server",
    "open_fake_openai",
]
