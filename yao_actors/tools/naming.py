"""Flat tool names: what a model sees, and how a name leads back to a server and a tool.

The model sees one flat name per tool, ``<server>__<tool>`` with the server id's
``.`` replaced by ``_`` (the seed's ``MCPToolName``). The seed also decoded names
by splitting on ``__`` (``ParseMCPToolName``), which misroutes server ids holding
``_`` and cannot reach tools whose names hold ``__``. Here decoding is kept for
parity only; dispatch resolves a name through a :class:`ToolNameTable` built with
the catalog, which also detects two tools claiming one name and
keeps every name within OpenAI's ``^[a-zA-Z0-9_-]{1,64}$``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping

import attrs

from yao_actors.errors import ConfigError

#: The names OpenAI (and most compatible endpoints) accept for a function.
OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

_MAX_LENGTH = 64
_HASH_LENGTH = 8
_ILLEGAL = re.compile(r"[^a-zA-Z0-9_-]")


def encode_tool_name(server_id: str, tool: str) -> str:
    """The seed's flat name: ``server_id`` with ``.`` → ``_``, then ``__``, then ``tool`` as is.

    Either part empty gives ``""`` (seed rule).
    """
    if not server_id or not tool:
        return ""
    return f"{server_id.replace('.', '_')}__{tool}"


def parse_tool_name(name: str) -> tuple[str, str, bool]:
    """The seed's decoding: ``(server_id, tool, ok)``.

    Splits on ``__`` left to right; exactly two non-empty parts are valid, and
    ``_`` in the server part turns back into ``.``. Anything else is
    ``("", "", False)``.
    """
    parts = name.split("__")
    if len(parts) != 2 or not parts[0] or not parts[1]:
        return "", "", False
    return parts[0].replace("_", "."), parts[1], True


def flat_tool_name(server_id: str, tool: str) -> str:
    """The name the model sees for ``tool`` of ``server_id``: always OpenAI-legal.

    The seed's encoding when it is legal; otherwise illegal characters become
    ``_`` and the name is cut to fit a ``-`` and a short hash of the original
    pair, so distinct pairs stay distinct and the result is deterministic.
    """
    encoded = encode_tool_name(server_id, tool)
    if OPENAI_NAME.fullmatch(encoded):
        return encoded
    digest = hashlib.sha256(f"{server_id}\x00{tool}".encode()).hexdigest()[:_HASH_LENGTH]
    stem = _ILLEGAL.sub("_", encoded)[: _MAX_LENGTH - _HASH_LENGTH - 1]
    return f"{stem}-{digest}" if stem else digest


@attrs.frozen
class ToolRef:
    """Where a flat name leads: a server id and that server's own tool name."""

    server: str
    tool: str


@attrs.frozen
class ToolNameTable:
    """The mapping from flat names to tools, built once per catalog.

    Build it with :meth:`build`; resolve a model's name with :meth:`resolve`.
    """

    names: Mapping[str, ToolRef]

    @classmethod
    def build(cls, refs: Iterable[ToolRef]) -> ToolNameTable:
        """Name every tool of ``refs``; two different tools under one name are a :class:`ConfigError`.

        The error names both sources so the configuration can be fixed (rename a
        server, or filter one of the tools out). A ref listed twice is one tool.
        """
        names: dict[str, ToolRef] = {}
        problems: list[str] = []
        for ref in refs:
            name = flat_tool_name(ref.server, ref.tool)
            seen = names.setdefault(name, ref)
            if seen != ref:
                problems.append(
                    f"tool name {name!r} is claimed by both {seen.tool!r} of server {seen.server!r} "
                    f"(mcpServers.{seen.server}) and {ref.tool!r} of server {ref.server!r} (mcpServers.{ref.server})"
                )
        if problems:
            raise ConfigError(problems)
        return cls(names)

    def resolve(self, name: str) -> ToolRef | None:
        """The tool a flat name stands for, or ``None`` if no tool has that name."""
        return self.names.get(name)
