"""Building a model object from its configured :class:`~yao_actors.specs.ModelSpec`.

``default_model_spec`` is the model of the embedded default: an OpenAI-compatible endpoint only when the user
names a model (``OPENAI_MODEL``, or ``serve --model``), the offline demo otherwise. ``OPENAI_API_KEY`` alone does
not switch: many shells export it for other tools, and the quick start promises no network and no key. Kept out of
the package's
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
    """The default assistant's model: ``OPENAI_MODEL`` at ``OPENAI_BASE_URL`` (default OpenAI's) with the key in
    ``OPENAI_API_KEY`` (a local Ollama needs none) when ``OPENAI_MODEL`` is set, else the offline demo."""
    env = os.environ if environ is None else environ
    if not env.get("OPENAI_MODEL"):
        return ModelSpec(id="default", provider="demo")
    return ModelSpec(
        id="default",
        provider="openai",
        base_url=env.get("OPENAI_BASE_URL") or "https://api.openai.com/v1",
        model=env["OPENAI_MODEL"],
        api_key_env="OPENAI_API_KEY",
    )


def unused_openai_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """The ``OPENAI_*`` variables set that do not choose the default model because ``OPENAI_MODEL`` is not (the
    banner says they are not used, and how to use them)."""
    env = os.environ if environ is None else environ
    if env.get("OPENAI_MODEL"):
        return []
    return [name for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL") if env.get(name)]
