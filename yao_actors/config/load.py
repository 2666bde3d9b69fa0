"""Reading a configuration: from a file, from decoded JSON, or the embedded default.

``load_config`` refuses a bad file with one message per problem, each naming
its key path, and treats an unknown key as an error — but in another MCP client's whole file (its servers and none
of this runtime's sections), whose other settings are ignored. What it notes without refusing (``Config.notes``) is
logged, each line starting with the file's name as its errors do.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from yao_actors.config.providers import default_model_spec
from yao_actors.config.schema import schema_problems
from yao_actors.config.sections import ConfigReader, other_clients_settings
from yao_actors.config.values import related_paths
from yao_actors.errors import ConfigError
from yao_actors.specs import DEFAULT_PROMPT, AssistantSpec, Config, ServerRef, ServerSpec, StdioTransport
from yao_actors.untrusted import json as untrusted_json

logger = logging.getLogger(__name__)


def load_config(path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None) -> Config:
    """Read and validate a JSON configuration file.

    Raises :class:`~yao_actors.errors.ConfigError` listing every problem found,
    each with its key path. ``environ`` (default ``os.environ``) supplies
    ``${VAR}`` references (in ``command``, ``args``, ``env``, ``cwd``, ``url``,
    ``headers``, ``server.token``, ``server.tokens``, a model's ``base_url`` and ``headers``).
    """
    source = os.fspath(path)
    try:
        with open(source, "rb") as file:
            raw = file.read()
    except OSError as error:
        raise ConfigError([f"cannot read the file: {error.strerror or error}"], source=source) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ConfigError([_not_utf8(raw, error)], source=source) from None
    try:
        data = untrusted_json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(
            [f"line {error.lineno} column {error.colno}: not valid JSON: {error.msg}"], source=source
        ) from None
    except ValueError as error:  # nested too deep, or an integer with too many digits
        raise ConfigError([f"not usable JSON: {error}"], source=source) from None
    return parse_config(data, environ=environ, source=source)


def _not_utf8(raw: bytes, error: UnicodeDecodeError) -> str:
    """Where a file stops being UTF-8, as a line and column (JSON files are UTF-8: RFC 8259 §8.1)."""
    before = raw[: error.start].decode("utf-8")  # valid up to the bad byte
    line = before.count("\n") + 1
    column = len(before) - (before.rfind("\n") + 1) + 1
    return f"line {line} column {column}: not UTF-8 text (byte 0x{raw[error.start]:02x}); save the file as UTF-8"


def parse_config(data: Any, *, environ: Mapping[str, str] | None = None, source: str | None = None) -> Config:
    """Validate a configuration given as decoded JSON (a dict), as :func:`load_config` does a file.

    ``data`` is checked against the JSON Schema (:func:`~yao_actors.config.schema.config_schema`)
    and by the reader; nothing is coerced: a value of the wrong type is a problem
    with its key path. Raises :class:`~yao_actors.errors.ConfigError` listing every problem.
    Model ids are not resolved here (``open_runtime(models=...)`` may add some):
    :func:`~yao_actors.config.check_config` does that.
    """
    base_dir = Path(source).parent if source is not None else None
    reader = ConfigReader(os.environ if environ is None else environ, base_dir=base_dir)
    if ignored := other_clients_settings(data):
        data = {key: value for key, value in data.items() if key not in ignored}
        reader.notes.append(
            f"{', '.join(ignored)}: another MCP client's settings, ignored (of a client's whole file, only its "
            "mcpServers are read)"
        )
    config = reader.config(data)
    problems = list(reader.problems)
    for path, message in schema_problems(data):
        if not any(related_paths(path, seen) for seen in reader.problem_paths):
            problems.append(f"{path}: {message}" if path else message)
    if problems:
        raise ConfigError(problems, source=source)
    assert config is not None
    where = f"{source}: " if source else ""
    for note in config.notes:
        logger.warning("%s%s", where, note)  # named like the errors: the file, then the key path
    return config


def default_config(*, environ: Mapping[str, str] | None = None) -> Config:
    """The embedded default: the bundled demo servers over stdio and one assistant.

    The assistant's model is an OpenAI-compatible endpoint when ``OPENAI_MODEL`` names one (at ``OPENAI_BASE_URL``,
    with ``OPENAI_API_KEY``), the offline ``demo`` model otherwise.
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
