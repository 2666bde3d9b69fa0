"""Building a model object from its configured :class:`~yao_actors.specs.ModelSpec`.

``default_model_spec`` is the model of the embedded default (DESIGN §1): a real
OpenAI-compatible endpoint when ``OPENAI_BASE_URL`` or ``OPENAI_API_KEY`` is set
(with ``OPENAI_MODEL``), the offline demo otherwise. Kept out of the package's
``__init__`` because it reaches the demo model in :mod:`yao_actors.demo`, which
builds on :mod:`yao_actors.models.offline`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from yao_actors.demo.model import DemoModel
from yao_actors.models.base import Model
from yao_actors.models.direct import DirectModel
from yao_actors.models.offline import TestModel
from yao_actors.models.openai import OpenAIModel
from yao_actors.specs import ModelSpec

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
"""The model asked for when ``OPENAI_MODEL`` is not set."""


def build_model(spec: ModelSpec) -> Model:
    """The model object for a configured model.

    The offline stand-ins keep no calls (nobody holds them to look, and each call holds the history it was given).
    """
    if spec.provider == "openai":
        return OpenAIModel(spec)
    if spec.provider == "demo":
        return DemoModel(keep_calls=0)
    if spec.provider == "direct":
        return DirectModel(keep_calls=0)
    return TestModel(keep_calls=0)


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
