"""What will fail first when a valid configuration starts, found without starting anything: a stdio server's command
that is not on ``PATH`` (or not executable), a model's ``api_key_env`` that is not set.

``yao-actors check`` prints these with the file's own problems; ``check --connect`` goes further and reaches every
server and model (:mod:`yao_actors.cli.probe`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

from yao_actors.specs import Config, StdioTransport

#: Hosts a model endpoint may have without an API key (a local Ollama, vLLM, llama.cpp ...).
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def preflight_problems(config: Config, *, environ: Mapping[str, str] | None = None) -> list[str]:
    """One message per thing that will fail first, each with its key path (see the module docstring)."""
    env = os.environ if environ is None else environ
    problems: list[str] = []
    for server_id, spec in config.servers.items():
        transport = spec.transport
        if (
            not spec.disabled
            and isinstance(transport, StdioTransport)
            and (problem := missing_executable(transport, env))
        ):
            problems.append(f"mcpServers.{server_id}.command: {problem}")
    used = {a.model for a in config.assistants.values()} | {
        a.fallback_model for a in config.assistants.values() if a.fallback_model
    }
    for model_id, model in config.models.items():
        key = model.api_key_env
        if model_id not in used or model.provider != "openai" or not key or key in env:
            continue
        host = urlsplit(model.base_url).hostname or ""
        if host not in LOOPBACK_HOSTS:
            problems.append(
                f"models.{model_id}.api_key_env: environment variable {key} is not set, so requests to "
                f"{model.base_url} go without an API key (set it; for an endpoint that needs none, write "
                '"api_key_env": null)'
            )
    return problems


def missing_executable(transport: StdioTransport, environ: Mapping[str, str]) -> str | None:
    """Why ``transport.command`` cannot be started as the server's process would start it, or ``None``."""
    command = transport.command
    if os.sep in command or (os.altsep and os.altsep in command):
        path = Path(transport.cwd or ".") / command
        if not path.is_file():
            return f"{command!r} does not exist" + (f" (relative to cwd {transport.cwd!r})" if transport.cwd else "")
        if not os.access(path, os.X_OK):
            return f"{command!r} is not executable (chmod +x it)"
        return None
    search = transport.env.get("PATH", environ.get("PATH", os.defpath))
    if shutil.which(command, path=search) is None:
        return f"{command!r} is not on PATH (install it, or give its full path)"
    return None
