"""Reading a configuration: from a file, from decoded JSON, or the embedded default.

``load_config`` refuses a bad file with one message per problem, each naming
its key path, and treats an unknown key as an error.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from yao_actors import untrusted_json
from yao_actors.config.sections import ConfigReader
from yao_actors.errors import ConfigError
from yao_actors.models.build import default_model_spec
from yao_actors.specs import DEFAULT_PROMPT, AssistantSpec, Config, ServerRef, ServerSpec, StdioTransport


def load_config(path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None) -> Config:
    """Read and validate a JSON configuration file.

    Raises :class:`~yao_actors.errors.ConfigError` listing every problem found,
    each with its key path. ``environ`` (default ``os.environ``) supplies
    ``${VAR}`` references in ``env``, ``headers`` and ``server.token``.
    """
    source = os.fspath(path)
    try:
        with open(source, encoding="utf-8") as file:
            text = file.read()
    except OSError as error:
        raise ConfigError([f"cannot read the file: {error.strerror or error}"], source=source) from None
    try:
        data = untrusted_json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(
            [f"line {error.lineno} column {error.colno}: not valid JSON: {error.msg}"], source=source
        ) from None
    except ValueError as error:  # nested too deep, or an integer with too many digits
        raise ConfigError([f"not usable JSON: {error}"], source=source) from None
    return parse_config(data, environ=environ, source=source)


def parse_config(data: Any, *, environ: Mapping[str, str] | None = None, source: str | None = None) -> Config:
    """Validate an already-decoded configuration (see :func:`load_config`)."""
    base_dir = Path(source).parent if source is not None else None
    reader = ConfigReader(os.environ if environ is None else environ, base_dir=base_dir)
    config = reader.config(data)
    if reader.problems:
        raise ConfigError(reader.problems, source=source)
    assert config is not None
    return config


def default_config(*, environ: Mapping[str, str] | None = None) -> Config:
    """The embedded default (DESIGN §1): the bundled demo servers over stdio and one assistant.

    The assistant's model is a real OpenAI-compatible endpoint when
    ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` are set, the offline ``demo`` model otherwise.
    """
    servers = {
        name: ServerSpec(id=name, transport=StdioTransport(sys.executable, ("-m", f"yao_actors.demo.{name}")))
        for name in ("weather", "clothing")
    }
    model = default_model_spec(environ=os.environ if environ is None else environ)
    assistant = AssistantSpec(
        id="default",
        model=model.id,
        prompt=(DEFAULT_PROMPT,),
        servers=tuple(ServerRef(name) for name in servers),
    )
    return Config(servers=servers, models={model.id: model}, assistants={"default": assistant})
