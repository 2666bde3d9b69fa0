"""The approval keys: which tool calls need a person's approval before they run.

``mcpServers.<id>.approval`` is ``true`` (every tool of the server), ``false``, or a list of the server's tool
names; ``assistants.<id>.approval`` a list of flat names ``server__tool`` or ``server__*`` (every tool of that
server; or ``"destructive"``: every tool that is not read-only and not marked ``destructiveHint: false``),
and ``assistants.<id>.approval_timeout`` the seconds a held call waits (default 3600).
"""

from __future__ import annotations

import re
from typing import Any, Final

from yao_actors.config.values import ValueReader, join_path, type_name
from yao_actors.specs import DESTRUCTIVE

#: A flat name, or a server's flat prefix followed by ``*``.
_PATTERN: Final = re.compile(r"^[a-zA-Z0-9_-]+__(\*|[a-zA-Z0-9_-]+)$")


def server_approval(reader: ValueReader, value: Any, path: str) -> bool | frozenset[str] | None:
    """``mcpServers.<id>.approval``: a boolean or a list of tool names."""
    if isinstance(value, bool):
        return value
    if not isinstance(value, list):
        reader.fail(path, f"expected true, false or a list of tool names, got {type_name(value)}")
        return None
    names = reader.strings(value, path)
    return frozenset(names) if len(names) == len(value) else None


def assistant_approval(reader: ValueReader, value: Any, path: str) -> tuple[str, ...] | None:
    """``assistants.<id>.approval``: ``"destructive"``, or a list of ``server__tool`` / ``server__*`` names (and
    ``"destructive"``)."""
    if value == DESTRUCTIVE:
        return (DESTRUCTIVE,)
    if isinstance(value, str):
        reader.fail(path, f"expected \"destructive\" or a list of 'server__tool' names, got {value!r}")
        return None
    names = reader.strings(value, path)
    if not isinstance(value, list) or len(names) != len(value):
        return None
    for index, name in enumerate(names):
        if name != DESTRUCTIVE and not _PATTERN.fullmatch(name):
            reader.fail(join_path(path, index), f"expected 'server__tool', 'server__*' or 'destructive', got {name!r}")
            return None
    return names
