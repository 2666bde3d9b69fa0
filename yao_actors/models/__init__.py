"""Models: the interface, the OpenAI-compatible client, the offline stand-ins, and building one from config.

``build_model`` turns a configured :class:`~yao_actors.config.ModelSpec` into a
model object; ``default_model_spec`` is the model of the embedded default
(DESIGN §1): a real OpenAI-compatible endpoint when ``OPENAI_BASE_URL`` or
``OPENAI_API_KEY`` is set (with ``OPENAI_MODEL``), the offline demo otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from yao_actors.config import ModelSpec
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
from yao_actors.models.offline import DemoModel, FunctionModel, RecordedCall, TestModel
from yao_actors.models.openai import OpenAIModel

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
"""The model asked for when ``OPENAI_MODEL`` is not set."""


def build_model(spec: ModelSpec) -> Model:
    """The model object for a configured model."""
    if spec.provider == "openai":
        return OpenAIModel(spec)
    if spec.provider == "demo":
        return DemoModel()
    return TestModel()


def default_model_spec(environ: Mapping[str, str] | None = None) -> ModelSpec:
    """The default assistant's model, read from ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` / ``OPENAI_MODEL``.

    Either of the first two selects a real endpoint (a local Ollama needs no
    key; OpenAI itself needs no base URL); neither selects the offline demo.
    """
    env = os.environ if environ is None else environ
    if not (env.get("OPENAI_BASE_URL") or env.get("OPENAI_API_KEY")):
        return ModelSpec(id="default", provider="demo")
    return ModelSpec(
        id="default",
        provider="openai",
        base_url=env.get("OPENAI_BASE_URL") or "https://api.openai.com/v1",
        model=env.get("OPENAI_MODEL") or DEFAULT_OPENAI_MODEL,
        api_key_env="OPENAI_API_KEY",
    )


__all__ = [
    "DEFAULT_OPENAI_MODEL",
    "Completion",
    "Delta",
    "DemoModel",
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
    "build_model",
    "default_model_spec",
]
