"""What a benchmark run will do, before it does anything: the :class:`BenchPlan`.

A plan is the tool calls of a batch (one or more flat ``server__tool`` names,
each with its arguments, spread over the batch round-robin), the batch sizes
(``N``, or a sweep of them), the modes to compare and how many interleaved
repetitions to time. :meth:`BenchPlan.calls_per_tool` says how many times each
tool will really be called, warm-up and baseline included, which ``--dry-run``
prints without starting anything.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from yao_actors.errors import BenchError
from yao_actors.specs import ServerSpec

#: Every mode a batch can run in, in the order tables list them.
MODES = ("raw", "actor", "parallel", "sequential")
#: What ``--modes`` defaults to.
DEFAULT_MODES = ("raw", "parallel", "sequential")
#: What each mode is, for ``--help`` and ``--dry-run``.
MODE_MEANINGS = {
    "raw": "the calls sent at once with a plain mcp client per server, no actor (the floor)",
    "actor": "the calls sent at once through the server actors' handles, no dispatch",
    "parallel": "execute_tool_calls, as a model turn runs them (every server at once)",
    "sequential": "execute_tool_calls(mode='sequential'): every call after the previous one",
}
#: What flat names cannot hold (``yao_actors.tools.naming`` turns it into ``_``).
_ILLEGAL = re.compile(r"[^a-zA-Z0-9_-]")


@attrs.frozen
class BenchCall:
    """One tool of the batch: its flat name (``server__tool``) and the arguments every call of it sends."""

    name: str
    arguments: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class BenchPlan:
    """The calls of a batch, the batch sizes, the modes and the repetitions of one benchmark run.

    ``sizes`` are the batch sizes to time (``N``, or a sweep), ``repeat`` the
    timed repetitions of each mode per size, interleaved; every size starts with
    ``warmup`` untimed batches per mode. The baseline ("one call") is ``repeat``
    single calls of each tool, timed alone.
    """

    calls: tuple[BenchCall, ...]
    sizes: tuple[int, ...]
    modes: tuple[str, ...] = DEFAULT_MODES
    repeat: int = 5
    warmup: int = 1

    def __attrs_post_init__(self) -> None:
        problems = []
        if not self.calls:
            problems.append("--call: give at least one SERVER__TOOL")
        if not self.sizes or any(size < 1 for size in self.sizes):
            problems.append(f"--calls/--sweep: batch sizes must be at least 1 (got {list(self.sizes)})")
        unknown = [mode for mode in self.modes if mode not in MODES]
        if unknown or not self.modes:
            problems.append(f"--modes: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(MODES)}")
        if self.repeat < 1:
            problems.append(f"--repeat: must be at least 1 (got {self.repeat})")
        if self.warmup < 0:
            problems.append(f"warm-up batches must be 0 or more (got {self.warmup})")
        if problems:
            raise BenchError(problems)

    def batch(self, size: int) -> list[BenchCall]:
        """The ``size`` calls of a batch: call ``i`` is ``calls[i % len(calls)]``."""
        return [self.calls[i % len(self.calls)] for i in range(size)]

    def calls_per_tool(self) -> dict[str, int]:
        """How many times each tool is really called by the whole run (warm-up and baseline included)."""
        counts = dict.fromkeys((call.name for call in self.calls), 0)
        for size in self.sizes:
            for call in self.batch(size):
                counts[call.name] += (self.warmup + self.repeat) * len(self.modes)
        for call in self.calls:
            counts[call.name] += self.repeat  # the one-call baseline
        return counts

    def describe(self, source: str, servers: Sequence[str]) -> str:
        """The plan in words, for ``--dry-run``: what starts, what is called how often, in which modes."""
        counts = self.calls_per_tool()
        lines = [
            f"config: {source}",
            f"servers started: {', '.join(servers) or '(none)'}",
            "tools called (arguments):",
            *(f"  {call.name} {json.dumps(dict(call.arguments), ensure_ascii=False)}" for call in self.calls),
            f"batch sizes (N): {', '.join(map(str, self.sizes))}; calls spread over the tools round-robin",
            "modes, interleaved:",
            *(f"  {mode}: {MODE_MEANINGS[mode]}" for mode in self.modes),
            f"repetitions: {self.repeat} timed per mode and size, after {self.warmup} warm-up batch(es) each; "
            f"baseline: {self.repeat} single call(s) of each tool",
            "real tool calls in total:",
            *(f"  {name}: {count}" for name, count in counts.items()),
            f"  all: {sum(counts.values())}",
        ]
        return "\n".join(lines)


def parse_arguments(values: Sequence[str], calls: int) -> list[dict[str, Any]]:
    """``--args`` values: none (``{}`` for every call), one for every ``--call``, or one per ``--call`` in order."""
    if len(values) not in (0, 1, calls):
        raise BenchError([f"--args: give it once (for every --call) or once per --call ({calls}); got {len(values)}"])
    parsed: list[dict[str, Any]] = []
    for position, text in enumerate(values, 1):
        try:
            value = json.loads(text)
        except ValueError as error:
            raise BenchError([f"--args #{position}: not valid JSON ({error}): {text!r}"]) from None
        if not isinstance(value, dict):
            raise BenchError([f"--args #{position}: must be a JSON object, got {type(value).__name__}: {text!r}"])
        parsed.append(value)
    if not parsed:
        return [{} for _ in range(calls)]
    return parsed * calls if len(parsed) == 1 else parsed


def parse_sizes(calls: int, sweep: str | None, *, for_plot: bool = False) -> tuple[int, ...]:
    """The batch sizes: ``--sweep`` (``1,2,4``) when given, else ``N``; a plot without a sweep gets 1, 2, 4, ... N."""
    if sweep:
        try:
            sizes = [int(part) for part in sweep.split(",") if part.strip()]
        except ValueError:
            raise BenchError([f"--sweep: comma-separated whole numbers, like 1,2,4,8 (got {sweep!r})"]) from None
        return tuple(sorted(set(sizes)))
    if for_plot:
        sizes = [1]
        while sizes[-1] * 2 < calls:
            sizes.append(sizes[-1] * 2)
        return tuple(sorted({*sizes, calls}))
    return (calls,)


def parse_modes(text: str) -> tuple[str, ...]:
    """``--modes`` (``raw,parallel,sequential``) in the order given, without repeats."""
    return tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))


def server_prefixes(servers: Mapping[str, ServerSpec]) -> dict[str, str]:
    """The flat-name prefix (``server__``) of each configured server: its id with ``.`` (and what OpenAI refuses) → ``_``."""
    return {server_id: _ILLEGAL.sub("_", server_id.replace(".", "_")) + "__" for server_id in servers}


def servers_named(plan: BenchPlan, servers: Mapping[str, ServerSpec]) -> list[str]:
    """The configured servers the plan's calls can belong to, in config order.

    A name that matches no server's prefix is a :class:`BenchError` listing the
    configured servers (their tools are listed once they run).
    """
    prefixes = server_prefixes(servers)
    problems = [
        f"--call {call.name}: no server of the config is named by it (a call is SERVER__TOOL); "
        f"servers: {', '.join(servers) or '(none)'}"
        for call in plan.calls
        if not any(call.name.startswith(prefix) for prefix in prefixes.values())
    ]
    if problems:
        raise BenchError(problems)
    return [
        server_id for server_id, prefix in prefixes.items() if any(call.name.startswith(prefix) for call in plan.calls)
    ]
