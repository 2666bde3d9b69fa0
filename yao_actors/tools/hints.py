"""What a tool says of itself: its title and MCP's annotations (``readOnlyHint``, ``destructiveHint``,
``idempotentHint``, ``openWorldHint``), with the spec's defaults for hints not given.

They are hints from the server, not guarantees: this runtime uses them where trusting them wrongly costs
little or where the user asked for it. A read-only or idempotent tool's call that failed because the
connection was lost is retried once (:mod:`yao_actors.tools.dispatch`); ``assistants.<id>.approval:
"destructive"`` holds every call that may destroy something (:mod:`yao_actors.conversation.interrupts.approvals`); the
title is shown to people and offered to the model in the tool's description.
"""

from __future__ import annotations

import attrs
import mcp.types


@attrs.frozen
class ToolHints:
    """A tool's title and hints; the defaults are the spec's for a tool that says nothing."""

    title: str = ""
    read_only: bool = False
    destructive: bool = True
    idempotent: bool = False
    open_world: bool = True

    @property
    def may_destroy(self) -> bool:
        """Not read-only and not marked ``destructiveHint: false`` (the spec reads ``destructiveHint`` only then)."""
        return not self.read_only and self.destructive

    @property
    def safe_to_repeat(self) -> bool:
        """Read-only or idempotent: running it again has no further effect."""
        return self.read_only or self.idempotent

    @classmethod
    def of(cls, tool: mcp.types.Tool) -> ToolHints:
        """The hints ``tool`` gives (its ``title``, else its annotations' ``title``)."""
        notes = tool.annotations
        title = tool.title or (notes.title if notes is not None else None) or ""
        if notes is None:
            return cls(title=title)
        return cls(
            title=title,
            read_only=notes.read_only_hint is True,
            destructive=notes.destructive_hint is not False,
            idempotent=notes.idempotent_hint is True,
            open_world=notes.open_world_hint is not False,
        )


NO_HINTS = ToolHints()
"""A tool that says nothing of itself."""


def offered_description(description: str, title: str) -> str:
    """A tool's description as offered to the model: its title first, when it has one the text does not start with."""
    if not title or description.startswith(title):
        return description
    return f"{title}. {description}" if description else title
