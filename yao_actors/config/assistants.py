"""The configuration reader's assistants: their models, prompts, MCP servers, loop options and fallback.

:class:`AssistantReader` reads the ``assistants`` section (and the global
``prompts``) with the seed's rules: only a real ``false``
disables the tool loop, and ``max_turn`` of 0 or less means 5. What the seed
silently coerced is refused here, each with its key path: a string for
``tool_loop`` or ``max_turn``, ``Infinity``, a fraction. Model ids are not
checked here: a runtime may get models from ``open_runtime(models=...)``, so they
are checked once, with both sets known (:func:`yao_actors.config.check_config`).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from yao_actors.config.approval import assistant_approval
from yao_actors.config.values import ValueReader, join_path, type_name
from yao_actors.specs import MIN_RESULT_BUDGET, AssistantSpec, Hooks, ResultBudget, RunTimeouts, ServerRef, ServerSpec

_HOOK_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")

#: The keys of ``assistants.<id>``, of its ``mcp`` and of ``mcp.options``.
ASSISTANT_KEYS = (
    "model", "prompt", "mcp", "timeouts", "hooks", "fallback_model", "max_tools", "history", "options", "fallback",
    "approval", "approval_timeout", "result_budget", "task_timeout",
)  # fmt: skip
MCP_KEYS = ("servers", "options")
LOOP_KEYS = ("tool_loop", "max_turn")
#: The default of ``max_turn`` (the seed's), also what a value of 0 or less means.
DEFAULT_MAX_TURN = 5


class AssistantReader(ValueReader):
    """Reads ``assistants`` and ``prompts``; collects one message per problem, each with its key path."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        super().__init__(environ)
        self.unused_resources: list[str] = []

    def assistants(self, value: Any, path: str, servers: Mapping[str, ServerSpec]) -> dict[str, AssistantSpec]:
        assistants = self.entries(value, path, "assistants", functools.partial(self.assistant, servers=servers))
        for spec in assistants.values():
            if isinstance(spec.fallback, str) and spec.fallback not in assistants:
                known = ", ".join(sorted(assistants))
                self.fail(
                    join_path(path, f"{spec.id}.fallback.assistant"),
                    f"unknown assistant {spec.fallback!r} (known: {known})",
                )
        return assistants

    def assistant(
        self, assistant_id: str, value: Any, path: str, servers: Mapping[str, ServerSpec]
    ) -> AssistantSpec | None:
        item = self.obj(value, path, ASSISTANT_KEYS)
        if item is None:
            return None
        if assistant_id.startswith("__yao."):
            self.fail(path, "ids starting with '__yao.' are reserved for built-in assistants")
        model = self.string(item.get("model"), join_path(path, "model"))
        prompt = self.prompt(item.get("prompt", []), join_path(path, "prompt"))
        options: dict[str, Any] = {}
        if "mcp" in item:
            options.update(self.mcp(item["mcp"], join_path(path, "mcp"), servers))
        if not (isinstance(item.get("mcp"), dict) and "servers" in item["mcp"]):
            self.note_no_servers(path, servers)
        options.update(self.optional_fields(item, path))
        history_ok, history_max = self.history(item.get("history", {}), join_path(path, "history"))
        if model is None or prompt is None or not history_ok or None in options.values():
            return None
        return AssistantSpec(id=assistant_id, model=model, prompt=prompt, history_max_messages=history_max, **options)

    def optional_fields(self, item: Mapping[str, Any], path: str) -> dict[str, Any]:
        """The optional fields ``item`` (an assistant) gives, each read by its reader (``None`` where refused), in
        the order their problems are reported."""
        readers: dict[str, Callable[[Any, str], Any]] = {
            "timeouts": self.timeouts,
            "hooks": self.hooks,
            "fallback_model": self.string,
            "max_tools": functools.partial(self.integer, minimum=1),
            "options": self.request_options,
            "fallback": self.fallback,
            "approval": functools.partial(assistant_approval, self),
            "approval_timeout": self.number,
            "task_timeout": self.number,
            "result_budget": self.result_budget,
        }
        return {key: read(item[key], join_path(path, key)) for key, read in readers.items() if key in item}

    def note_no_servers(self, path: str, servers: Mapping[str, ServerSpec]) -> None:
        """An assistant that names no ``mcp.servers`` gets none (as an agent of PydanticAI or the OpenAI Agents SDK
        has only the tools it is given): say so when the file has servers, since it may be an oversight."""
        usable = [f'"{server_id}"' for server_id, spec in servers.items() if not spec.disabled]
        if usable:
            self.notes.append(
                f"{path}: no mcp.servers, so its model gets no tools; list those it may use "
                f'("mcp": {{"servers": [{", ".join(usable)}]}}), or write "servers": [] to say it needs none'
            )

    def history(self, value: Any, path: str) -> tuple[bool, int | None]:
        """``history.max_messages``: an integer >= 0 (default 20), or ``null`` for the whole history."""
        item = self.obj(value, path, ("max_messages",))
        if item is None:
            return False, None
        limit = item.get("max_messages", 20)
        if limit is None:
            return True, None
        limit = self.integer(limit, join_path(path, "max_messages"))
        return limit is not None, limit

    def result_budget(self, value: Any, path: str) -> ResultBudget | None:
        """``result_budget``: ``per_result`` and ``per_turn``, characters of tool results the model sees."""
        item = self.obj(value, path, ("per_result", "per_turn"))
        if item is None:
            return None
        default = ResultBudget()
        sizes = {
            key: self.integer(item.get(key, getattr(default, key)), join_path(path, key), minimum=MIN_RESULT_BUDGET)
            for key in ("per_result", "per_turn")
        }
        per_result, per_turn = sizes["per_result"], sizes["per_turn"]
        if per_result is None or per_turn is None:
            return None
        return ResultBudget(per_result, per_turn)

    def request_options(self, value: Any, path: str) -> dict[str, Any] | None:
        """``options``: request fields (``temperature``, ``tool_choice``, ...) merged over the model's ``params``."""
        if not isinstance(value, dict):
            self.fail(path, f"expected an object of request fields, got {type_name(value)}")
            return None
        return value

    def fallback(self, value: Any, path: str) -> bool | str | None:
        """``true`` (the built-in fallback), ``false`` (none), or ``{"assistant": "<id>"}``."""
        if isinstance(value, bool):
            return value
        item = self.obj(value, path, ("assistant",)) if isinstance(value, dict) else None
        if item is None:
            if not isinstance(value, dict):
                self.fail(path, f'expected true, false or {{"assistant": "<id>"}}, got {type_name(value)}')
            return None
        return self.string(item.get("assistant"), join_path(path, "assistant"))

    def prompt(self, value: Any, path: str) -> tuple[str, ...] | None:
        if isinstance(value, str):
            return (value,) if value else ()
        if isinstance(value, list):
            before = len(self.problems)
            prompts = self.strings(value, path)
            return prompts if len(self.problems) == before else None
        self.fail(path, f"expected a string or a list of strings, got {type_name(value)}")
        return None

    def mcp(self, value: Any, path: str, servers: Mapping[str, ServerSpec]) -> dict[str, Any]:
        item = self.obj(value, path, MCP_KEYS)
        if item is None:
            return {"servers": None}
        result: dict[str, Any] = {}
        if "servers" in item:
            entries = item["servers"]
            if not isinstance(entries, list):
                self.fail(join_path(path, "servers"), f"expected a list, got {type_name(entries)}")
                result["servers"] = None
            else:
                refs = [
                    self.server_ref(entry, join_path(join_path(path, "servers"), i), servers)
                    for i, entry in enumerate(entries)
                ]
                result["servers"] = None if None in refs else tuple(r for r in refs if r is not None)
        if "options" in item:
            options_path = join_path(path, "options")
            options = self.obj(item["options"], options_path, LOOP_KEYS)
            if options is None:
                result["tool_loop"] = None
            else:
                if "tool_loop" in options:
                    result["tool_loop"] = self.boolean(options["tool_loop"], join_path(options_path, "tool_loop"))
                if "max_turn" in options:
                    result["max_turn"] = self.max_turn(options["max_turn"], join_path(options_path, "max_turn"))
        return result

    def max_turn(self, value: Any, path: str) -> int | None:
        """A whole number of turns; the seed's rule that 0 or less means 5 stays. Anything else is refused:
        a string or ``true`` (the seed made them 5), ``Infinity`` (the seed crashed), a fraction (truncated)."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(path, f"expected a whole number of turns, got {type_name(value)}")
            return None
        if not math.isfinite(value):
            self.fail(path, f"must be a finite number of turns, got {value}")
            return None
        if 0 < value < 1:
            self.fail(path, f"must be at least 1 (a fraction below 1 would mean no turn at all), got {value}")
            return None
        if value != int(value):
            self.fail(path, f"must be a whole number of turns, got {value}")
            return None
        return max_turns(value)

    def server_ref(self, entry: Any, path: str, servers: Mapping[str, ServerSpec]) -> ServerRef | None:
        """Every seed form: ``"id"``, ``{"server_id", "tools", "resources"}``, ``{"id": [...]}``,
        ``{"id": {"tools", "resources"}}``.

        ``resources`` is accepted and not used (the seed kept it and never offered
        resources to the model): one warning per load names where it was given.
        """
        before = len(self.problems)
        server_id: Any
        item: dict[str, Any] = {}
        if isinstance(entry, str):
            server_id = entry
        elif isinstance(entry, dict) and "server_id" in entry:
            item = self.obj(entry, path, ("server_id", "tools", "resources")) or {}
            server_id = entry["server_id"]
        elif isinstance(entry, dict) and len(entry) == 1:
            server_id, spec = next(iter(entry.items()))
            path = join_path(path, server_id)
            item = {"tools": spec} if isinstance(spec, list) else self.obj(spec, path, ("tools", "resources")) or {}
        else:
            self.fail(
                path,
                'expected "id", {"server_id": "id", "tools": [...]}, {"id": ["tool", ...]} or {"id": {"tools": [...]}}',
            )
            return None
        if not isinstance(server_id, str) or server_id not in servers:
            known = ", ".join(f'"{s}"' for s in servers) or "none configured"
            self.fail(path, f"unknown server {json.dumps(server_id, ensure_ascii=False)} (known: {known})")
            return None
        names = self.strings(item.get("tools", []), join_path(path, "tools"))
        if "resources" in item:
            self.strings(item["resources"], join_path(path, "resources"))
            self.unused_resources.append(join_path(path, "resources"))
        return ServerRef(server_id, names) if len(self.problems) == before else None

    def timeouts(self, value: Any, path: str) -> RunTimeouts | None:
        item = self.obj(value, path, ("run", "model", "turn"))
        if item is None:
            return None
        numbers = {key: self.number(item[key], join_path(path, key)) for key in item if key in ("run", "model", "turn")}
        if None in numbers.values():
            return None
        return RunTimeouts(**numbers)  # type: ignore[arg-type]

    def hooks(self, value: Any, path: str) -> Hooks | None:
        item = self.obj(value, path, ("create", "next"))
        if item is None:
            return None
        refs: dict[str, str] = {}
        for key, ref in item.items():
            if key not in ("create", "next"):
                continue
            if not isinstance(ref, str) or not _HOOK_REF.fullmatch(ref):
                self.fail(
                    join_path(path, key), f'expected "module:function", got {json.dumps(ref, ensure_ascii=False)}'
                )
                return None
            refs[key] = ref
        return Hooks(**refs)


def tool_loop_enabled(value: Any) -> bool:
    """The seed's rule: only a real boolean ``false`` disables the tool loop (the reader refuses non-booleans)."""
    return value is not False


def max_turns(value: Any) -> int:
    """The seed's rule for ``max_turn``: a number > 0, fractional part truncated; anything else → 5.

    The reader refuses what this would coerce (strings, booleans, fractions, ``Infinity``);
    of the rule it keeps that 0 or less means 5.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        return DEFAULT_MAX_TURN
    return int(value)
