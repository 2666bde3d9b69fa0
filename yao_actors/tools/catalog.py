"""The tools a model sees for one assistant, and the cache that keeps them.

A :class:`Catalog` is built from the assistant's server list (or a per-run
override that replaces it, unless empty — seed rule) in order: each server's
listed tools, narrowed by the entry's ``tools`` filter, up to ``max_tools``
included tools. It holds the OpenAI tool schemas, the samples system message
(the seed's layout with JSON values), the name table that resolves a model's
flat names back to tools, and the warnings of the build. A server that is down
contributes no tools and a warning instead of failing the build.

A :class:`CatalogCache` rebuilds a catalog only when the tool list of one of its
servers changed (the handles' ``tools_version``), not on every request.
"""

from __future__ import annotations

import functools
import re
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs
import mcp.types

from yao_actors.specs import MAX_SAMPLES_PER_TOOL, AssistantSpec, Sample, ServerRef
from yao_actors.tools.apps import MODEL, NO_INTERFACE, ToolInterface, tool_interface
from yao_actors.tools.hints import NO_HINTS, ToolHints, offered_description
from yao_actors.tools.naming import ToolNameTable, ToolRef
from yao_actors.tools.results import compact_json
from yao_actors.tools.schema_gate import tool_schema_notes
from yao_actors.tools.tool_server import ServerState, ToolSource

SAMPLES_HEADER = (
    "\n\n## MCP Tool Usage Examples\n\nThe following examples demonstrate how to use MCP tools correctly:\n\n"
)
_ILLEGAL = re.compile(r"[^a-zA-Z0-9_-]")


@attrs.frozen
class CatalogEntry:
    """One tool as offered to the model: its flat name and where it leads."""

    name: str
    server: str
    tool: str
    description: str
    input_schema: Mapping[str, Any]
    samples: tuple[Sample, ...] = ()
    hints: ToolHints = NO_HINTS
    """The tool's title and annotations (:mod:`yao_actors.tools.hints`)."""
    schema_notes: tuple[str, ...] = ()
    """What of the tool's schemas the gate does not enforce (:func:`~yao_actors.tools.schema_gate.tool_schema_notes`)."""
    interface: ToolInterface = NO_INTERFACE
    """Its app (MCP Apps) and who may call it, when its server's ``apps`` is on (:mod:`yao_actors.tools.apps`)."""

    def to_openai(self) -> dict[str, Any]:
        """The OpenAI tool schema of this entry (``type: "function"``; the name, description and parameters)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": offered_description(self.description, self.hints.title),
                "parameters": self.input_schema,
            },
        }


@attrs.frozen
class Catalog:
    """The tools of one assistant (or one run), ready for a model request and for dispatch.

    ``complete`` is false when some selected server could not list its tools;
    a cache does not keep such a catalog. ``unavailable`` maps those servers to
    why (``"restarting"``, ``"not running"``): a call to one of their tools is
    answered ``server_unavailable``, not ``unknown_tool`` (:meth:`unavailable_server`).
    What the ``max_tools`` cap left out: ``capped`` maps a server to its tools past the cap, ``unlisted`` names the
    servers after it (not even listed); :meth:`not_offered` says it per server. Iterating a catalog gives its
    :class:`CatalogEntry` values in the order the model is offered them; ``len()`` is how many.
    """

    entries: tuple[CatalogEntry, ...] = ()
    warnings: tuple[str, ...] = ()
    complete: bool = True
    unavailable: Mapping[str, str] = attrs.field(factory=dict)
    table: ToolNameTable = attrs.field(factory=lambda: ToolNameTable({}))
    max_tools: int = 20
    capped: Mapping[str, tuple[str, ...]] = attrs.field(factory=dict)
    unlisted: tuple[str, ...] = ()
    _by_ref: Mapping[ToolRef, CatalogEntry] = attrs.field(init=False, repr=False)

    @_by_ref.default
    def _index(self) -> Mapping[ToolRef, CatalogEntry]:
        return {ToolRef(entry.server, entry.tool): entry for entry in self.entries}

    def __iter__(self) -> Iterator[CatalogEntry]:
        """The entries, in the order the model is offered them: ``for entry in await runtime.catalog("default")``."""
        return iter(self.entries)

    def __len__(self) -> int:
        """How many tools the model is offered."""
        return len(self.entries)

    @functools.cached_property
    def tools(self) -> tuple[dict[str, Any], ...]:
        """The OpenAI tool schemas, in catalog order (built once: a catalog serves every turn of many runs)."""
        return tuple(entry.to_openai() for entry in self.entries)

    @functools.cached_property
    def hints(self) -> Mapping[str, ToolHints]:
        """What each offered tool says of itself (title, annotations), by flat name."""
        return {entry.name: entry.hints for entry in self.entries}

    @functools.cached_property
    def samples_message(self) -> str:
        """The samples system message (seed layout, JSON values), or ``""`` when no tool has samples."""
        sections = [_samples_section(entry) for entry in self.entries if entry.samples]
        return SAMPLES_HEADER + "".join(sections) if sections else ""

    def resolve(self, name: str) -> CatalogEntry | None:
        """The entry a model's flat tool name stands for (through the name table), or ``None``."""
        ref = self.table.resolve(name)
        return None if ref is None else self._by_ref.get(ref)

    def entry_of(self, ref: ToolRef) -> CatalogEntry | None:
        """The entry of a server's tool, or ``None`` when the catalog does not offer it."""
        return self._by_ref.get(ref)

    def not_offered(self) -> dict[str, str]:
        """Why tools of a server are left out by the ``max_tools`` cap, by server id (empty: none are)."""
        cap = f"the assistant's max_tools ({self.max_tools}) was reached"
        reasons = {server: f"{cap}: not offered: {', '.join(tools)}" for server, tools in self.capped.items()}
        reasons.update({server: f"{cap} before this server: none of its tools offered" for server in self.unlisted})
        return reasons

    @functools.cached_property
    def schema_notes(self) -> dict[str, str]:
        """What of the offered tools' schemas is not enforced, by server id (empty: all is)."""
        notes: dict[str, list[str]] = {}
        for entry in self.entries:
            notes.setdefault(entry.server, []).extend(f"tool {entry.tool!r}: {note}" for note in entry.schema_notes)
        return {server: "; ".join(lines) for server, lines in notes.items() if lines}

    def unavailable_server(self, name: str) -> str | None:
        """The server a flat tool name (not in the catalog) belongs to, when that server is selected but down."""
        for server_id in self.unavailable:
            prefix = _ILLEGAL.sub("_", server_id.replace(".", "_")) + "__"
            if name.startswith(prefix) and len(name) > len(prefix):
                return server_id
        return None


def _samples_section(entry: CatalogEntry) -> str:
    text = f"### {entry.name}\n\n"
    if entry.description:
        text += f"**Description**: {entry.description}\n\n"
    for number, sample in enumerate(entry.samples[:MAX_SAMPLES_PER_TOOL], start=1):
        text += f"**Example {number}" + (f" - {sample.name}" if sample.name else "") + "**:\n"
        if sample.description:
            text += f"- Description: {sample.description}\n"
        if sample.input is not None:
            text += f"- Input: `{compact_json(sample.input)}`\n"
        if sample.output is not None:
            text += f"- Output: `{compact_json(sample.output)}`\n"
        text += "\n"
    return text


def select_servers(assistant: AssistantSpec, override: Sequence[ServerRef] = ()) -> tuple[ServerRef, ...]:
    """The server list of a run: a non-empty ``override`` (from a hook) replaces the assistant's."""
    return tuple(override) if override else assistant.servers


async def build_catalog(
    refs: Sequence[ServerRef], servers: Mapping[str, ToolSource], *, max_tools: int = 20, audience: str = MODEL
) -> Catalog:
    """Build the catalog of ``refs`` in order from the running ``servers``: the tools ``audience`` may call (the
    model's, or with ``"app"`` those their servers' apps may call: ``_meta.ui.visibility``).

    Tools past ``max_tools`` are skipped with one warning naming them; once the
    cap is reached the servers after it are not even listed (seed rule), so a
    server down past the cap cannot make the catalog incomplete. A server that
    is not running or is down adds a warning and no tools. Two tools with one
    flat name raise :class:`~yao_actors.errors.ConfigError` naming both.
    """
    included: dict[ToolRef, CatalogEntry] = {}
    skipped: dict[str, list[str]] = {}
    warnings: list[str] = []
    unlisted: tuple[str, ...] = ()
    unavailable: dict[str, str] = {}
    for position, ref in enumerate(refs):
        if len(included) >= max_tools:
            unlisted = tuple(dict.fromkeys(r.server_id for r in refs[position:]))
            break
        tools = await _list(ref.server_id, servers, warnings, unavailable)
        if tools is None:
            continue
        wanted = set(ref.tools)
        apps = servers[ref.server_id].spec.apps
        for tool in tools:
            key = ToolRef(ref.server_id, tool.name)
            interface = tool_interface(tool)
            if (wanted and tool.name not in wanted) or key in included or audience not in interface.visibility:
                continue  # a tool only its app may call is never offered to the model
            if len(included) >= max_tools:
                skipped.setdefault(ref.server_id, []).append(tool.name)
                continue
            samples = servers[ref.server_id].spec.samples.get(tool.name, ())
            included[key] = CatalogEntry(
                "",
                ref.server_id,
                tool.name,
                tool.description or "",
                tool.input_schema,
                samples,
                ToolHints.of(tool),
                tool_schema_notes(tool),
                interface if apps else NO_INTERFACE,
            )
    if skipped or unlisted:
        listed = [f"{server}: {', '.join(names)}" for server, names in skipped.items()]
        listed += [f"servers not listed: {', '.join(unlisted)}"] if unlisted else []
        warnings.append(f"tool limit of {max_tools} reached; skipped {'; '.join(listed)}")
    table = ToolNameTable.build(included)
    entries = tuple(attrs.evolve(entry, name=name) for name, entry in zip(table.names, included.values(), strict=True))
    capped = {server: tuple(names) for server, names in skipped.items()}
    return Catalog(
        entries,
        tuple(warnings),
        not unavailable,
        unavailable=unavailable,
        table=table,
        max_tools=max_tools,
        capped=capped,
        unlisted=unlisted,
    )


async def _list(
    server_id: str, servers: Mapping[str, ToolSource], warnings: list[str], unavailable: dict[str, str]
) -> tuple[mcp.types.Tool, ...] | None:
    source = servers.get(server_id)
    state = "not running" if source is None else source.state.value
    if source is None or source.state is not ServerState.READY:
        warnings.append(f"server {server_id!r} is {state}; its tools are not offered")
        unavailable[server_id] = state
        return None
    return await source.list_tools()


@attrs.define(eq=False)
class CatalogCache:
    """Catalogs by server selection, rebuilt only when a selected server's tool list changed.

    Holds at most ``maxsize`` selections (least recently used dropped first).
    """

    maxsize: int = 64
    _entries: OrderedDict[tuple[tuple[ServerRef, ...], int], tuple[tuple[int | None, ...], Catalog]] = attrs.field(
        factory=OrderedDict, init=False
    )

    async def get(
        self, assistant: AssistantSpec, servers: Mapping[str, ToolSource], *, override: Sequence[ServerRef] = ()
    ) -> Catalog:
        """The catalog of ``assistant`` (or of ``override``), from the cache when still current."""
        refs = select_servers(assistant, override)
        key = (refs, assistant.max_tools)
        versions = tuple(source.tools_version if (source := servers.get(ref.server_id)) else None for ref in refs)
        cached = self._entries.get(key)
        if cached is not None and cached[0] == versions:
            self._entries.move_to_end(key)
            return cached[1]
        catalog = await build_catalog(refs, servers, max_tools=assistant.max_tools)
        if catalog.complete:
            self._entries[key] = (versions, catalog)
            self._entries.move_to_end(key)
            while len(self._entries) > self.maxsize:
                self._entries.popitem(last=False)
        else:
            self._entries.pop(key, None)
        return catalog
