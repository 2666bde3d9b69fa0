"""Models: the interface, the OpenAI-compatible client and the offline stand-ins.

Building one from configuration is :mod:`yao_actors.config.providers`; the demo
model lives with the demo servers in :mod:`yao_actors.demo.model`.
"""

from __future__ import annotations

from yao_actors.models.base import (
    Completion,
    Delta,
    Message,
    Model,
    OnDelta,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolSchema,
    Usage,
)
from yao_actors.models.offline import FunctionModel, RecordedCall, TestModel
from yao_actors.models.openai import OpenAIModel

__all__ = [
    "Completion",
    "Delta",
    "FunctionModel",
    "Message",
    "Model",
    "OnDelta",
    "OpenAIModel",
    "ReasoningDelta",
    "RecordedCall",
    "TestModel",
    "TextDelta",
    "ToolCall",
    "ToolCallDelta",
    "ToolSchema",
    "Usage",
]
