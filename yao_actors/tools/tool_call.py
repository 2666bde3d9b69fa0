"""A tool call as a model asks for it: what the tool core is given to run.

Models make these (:mod:`yao_actors.models` re-exports it as ``yao_actors.models.ToolCall``) and the tool core runs
them (:mod:`.dispatch`): it is defined here, below both, so that the tool core never imports the models.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs


def _arguments_text(value: str | Mapping[str, Any]) -> str:
    """Arguments as the model sends them: JSON text; a dict (written by hand in a script) becomes its JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(dict(value), ensure_ascii=False, separators=(",", ":"))


@attrs.frozen
class ToolCall:
    """A tool call as the model asked for it; ``arguments`` is the raw JSON text.

    ``arguments`` may be given as a dict too (``ToolCall("c1", "weather__get", {"city": "北京"})``): it is kept as
    its JSON text, which is what a model sends.
    """

    id: str
    name: str
    arguments: str = attrs.field(default="", converter=_arguments_text)

    def to_message(self) -> dict[str, Any]:
        """The entry of an assistant message's ``tool_calls`` list."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}
