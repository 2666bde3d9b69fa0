"""Checking a whole :class:`~yao_actors.specs.Config`: the references between its records.

A file is checked as it is read; records built in Python are checked here, as
is what only a runtime knows: the models given to ``open_runtime(models=...)``.
:func:`check_config` is the one place model references are resolved, with both
sets known.
"""

from __future__ import annotations

from collections.abc import Iterable

from yao_actors.errors import ConfigError
from yao_actors.specs import BUILTIN_MODEL_IDS, Config


def config_problems(config: Config, *, models: Iterable[str] = ()) -> list[str]:
    """What is wrong between the records of ``config``, one message per problem with its key path.

    ``models`` are the ids of models given besides ``config.models`` (``open_runtime(models=...)``).
    """
    known_models = sorted({*config.models, *BUILTIN_MODEL_IDS, *models})
    problems = []
    for assistant in config.assistants.values():
        path = f"assistants.{assistant.id}"
        for key, model_id in (("model", assistant.model), ("fallback_model", assistant.fallback_model)):
            if model_id is not None and model_id not in known_models:
                problems.append(f"{path}.{key}: unknown model {model_id!r} (known: {', '.join(known_models)})")
        for i, ref in enumerate(assistant.servers):
            if ref.server_id not in config.servers:
                known = ", ".join(f'"{s}"' for s in config.servers) or "none configured"
                problems.append(f'{path}.mcp.servers[{i}]: unknown server "{ref.server_id}" (known: {known})')
        if isinstance(assistant.fallback, str) and assistant.fallback not in config.assistants:
            known = ", ".join(sorted(config.assistants))
            problems.append(f"{path}.fallback.assistant: unknown assistant {assistant.fallback!r} (known: {known})")
    return problems


def check_config(config: Config, *, models: Iterable[str] = ()) -> None:
    """Raise :class:`ConfigError` listing every problem :func:`config_problems` finds."""
    problems = config_problems(config, models=models)
    if problems:
        raise ConfigError(problems)
