"""Run a :class:`~yao_actors.bench.plan.BenchPlan` against real servers: :func:`open_bench`, then :func:`run_bench`.

``open_bench`` starts a server actor for every server the plan's calls name
(over the transport the config gives it), resolves each ``server__tool`` name
through the same catalog a model turn uses, and, when the ``raw`` mode is asked
for, opens one plain ``mcp`` client per server as well (the floor: no actor, no
dispatch). ``run_bench`` times every mode batch by batch, interleaved repetition
by repetition so machine noise hits them alike, and counts every failed call by
its kind instead of hiding it in the timing. This measures; it asserts no time.
"""

from __future__ import annotations

import collections
import functools
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import attrs
import mcp
import trio

from yao_actors.bench.plan import BenchCall, BenchPlan, servers_named
from yao_actors.errors import BenchError, ErrorKind
from yao_actors.models.base import ToolCall
from yao_actors.specs import Config, ServerRef, ServerSpec
from yao_actors.tasks import open_owned_nursery
from yao_actors.tools.catalog import Catalog, CatalogEntry, build_catalog
from yao_actors.tools.dispatch import collect_tool_calls
from yao_actors.tools.results import ToolCallResult, ToolOutcome, call_outcome, tool_message_content
from yao_actors.tools.server_actor import ServerHandle, serve_mcp_server
from yao_actors.transports import Connector, Link, open_client

Progress = Callable[[str], None]
"""Receives one short line saying what runs now (``N=4 repetition 2/5: parallel``)."""

#: The failure counts of a batch: kind (an ``ErrorKind`` value, or a raw client's exception type) → calls.
Failures = collections.Counter[str]


@attrs.frozen
class Target:
    """A tool of the batch, resolved: its catalog entry and the arguments every call of it sends."""

    entry: CatalogEntry
    arguments: Mapping[str, Any]

    @functools.cached_property
    def arguments_json(self) -> str:
        return json.dumps(dict(self.arguments), ensure_ascii=False)


@attrs.define(eq=False)
class Bench:
    """The servers of a plan, running and resolved; made by :func:`open_bench`."""

    plan: BenchPlan
    targets: tuple[Target, ...]
    handles: Mapping[str, ServerHandle]
    catalog: Catalog
    raw_clients: Mapping[str, mcp.Client]

    def targets_of(self, size: int) -> list[Target]:
        """The ``size`` targets of a batch, round-robin over the plan's calls."""
        return [self.targets[i % len(self.targets)] for i in range(size)]


@attrs.define
class BenchResults:
    """What :func:`run_bench` measured: wall seconds and failures per ``(size, mode)``, and the baseline.

    ``baseline`` holds each tool's single-call times (through ``baseline_mode``:
    ``raw`` when it runs, else ``actor``); ``retried`` counts calls that
    dispatch ran a second time, alone, after a retryable failure.
    """

    samples: dict[tuple[int, str], list[float]] = attrs.field(factory=dict)
    failures: dict[tuple[int, str], Failures] = attrs.field(factory=dict)
    retried: dict[tuple[int, str], int] = attrs.field(factory=dict)
    warmup_failures: dict[tuple[int, str], Failures] = attrs.field(factory=dict)
    baseline: dict[str, list[float]] = attrs.field(factory=dict)
    baseline_failures: Failures = attrs.field(factory=collections.Counter)
    baseline_mode: str = "raw"
    result_chars: dict[str, int] = attrs.field(factory=dict)
    """Each tool's largest result in the baseline's calls, in characters of the tool message a model gets
    (before the result budget; a tool with an ``outputSchema`` is measured by its content blocks)."""


@attrs.frozen
class _Batch:
    failures: Failures
    retried: int = 0


@asynccontextmanager
async def open_bench(config: Config, plan: BenchPlan, *, connect: Connector = open_client) -> AsyncIterator[Bench]:
    """Start the servers ``plan`` names (actors, plus plain clients for ``raw``); stop them all on exit.

    Raises :class:`BenchError` before timing anything when a ``--call`` name is
    not a tool of a running server (the message lists the tools there are), or
    when a plain client cannot connect.
    """
    server_ids = servers_named(plan, config.servers)
    async with open_owned_nursery() as nursery, AsyncExitStack() as stack:
        handles = await _start_actors(nursery, [config.servers[i] for i in server_ids], connect)
        catalog = await build_catalog([ServerRef(i) for i in server_ids], handles, max_tools=1_000_000)
        targets = _resolve(plan.calls, catalog)
        raw_clients: dict[str, mcp.Client] = {}
        if "raw" in plan.modes:
            for server_id in dict.fromkeys(target.entry.server for target in targets):
                raw_clients[server_id] = await _open_raw(stack, handles[server_id].spec, connect)
        yield Bench(plan, targets, handles, catalog, raw_clients)


async def _start_actors(
    nursery: trio.Nursery, specs: Sequence[ServerSpec], connect: Connector
) -> dict[str, ServerHandle]:
    started: dict[str, ServerHandle] = {}

    async def start(spec: ServerSpec) -> None:
        started[spec.id] = await nursery.start(functools.partial(serve_mcp_server, spec, connect=connect))

    async with trio.open_nursery() as starters:
        for spec in specs:
            starters.start_soon(start, spec)
    return {spec.id: started[spec.id] for spec in specs}


def _resolve(calls: Sequence[BenchCall], catalog: Catalog) -> tuple[Target, ...]:
    problems = []
    targets = []
    for call in calls:
        entry = catalog.resolve(call.name)
        if entry is None:
            problems.append(f"--call {call.name}: no such tool")
        else:
            targets.append(Target(entry, call.arguments))
    if problems:
        available = ", ".join(entry.name for entry in catalog.entries) or "(none)"
        problems.append(f"available tools: {available}")
        problems.extend(f"note: {warning}" for warning in catalog.warnings)
        raise BenchError(problems)
    return tuple(targets)


async def _open_raw(stack: AsyncExitStack, spec: ServerSpec, connect: Connector) -> mcp.Client:
    """A plain client of ``spec``'s server over the same transport, warmed up like the actor (tools listed)."""
    try:
        client = await stack.enter_async_context(connect(spec, link=Link()))
        await client.list_tools()
    except Exception as error:
        raise BenchError([f"--modes raw: a plain client could not reach server {spec.id!r}: {error!r}"]) from error
    return client


def batch_runner(bench: Bench, mode: str) -> Callable[[int], Awaitable[_Batch]]:
    """The way ``mode`` runs a batch of N calls on ``bench``."""
    runners: dict[str, Callable[[Bench, str, int], Awaitable[_Batch]]] = {
        "raw": functools.partial(_concurrent_batch, _raw_call),
        "actor": functools.partial(_concurrent_batch, _actor_call),
        "parallel": _dispatched,
        "sequential": _dispatched,
    }
    return functools.partial(runners[mode], bench, mode)


async def _concurrent_batch(
    call: Callable[[Bench, Target], Awaitable[str | None]], bench: Bench, mode: str, size: int
) -> _Batch:
    """One batch of direct calls (``raw`` through the client, ``actor`` through the server's handle), all at once."""
    failures: Failures = collections.Counter()

    async def one(target: Target) -> None:
        kind = await call(bench, target)
        if kind is not None:
            failures[kind] += 1

    async with trio.open_nursery() as nursery:
        for target in bench.targets_of(size):
            nursery.start_soon(one, target)
    return _Batch(failures)


async def _raw_call(bench: Bench, target: Target, sizes: dict[str, int] | None = None) -> str | None:
    """One call with the plain client under the server's deadline: ``None``, or the kind of its failure (and the
    size of its result in ``sizes``)."""
    entry = target.entry
    client = bench.raw_clients[entry.server]
    with trio.move_on_after(bench.handles[entry.server].spec.timeout):
        try:
            result = await client.call_tool(entry.tool, dict(target.arguments))
        except Exception as error:  # a raw client's failure is counted by its type, and the batch goes on
            return type(error).__name__
        _record_size(sizes, entry, call_outcome(result, None, 0.0))
        return ErrorKind.TOOL_ERROR.value if result.is_error else None
    return ErrorKind.TIMEOUT.value


async def _actor_call(bench: Bench, target: Target, sizes: dict[str, int] | None = None) -> str | None:
    outcome = await bench.handles[target.entry.server].call_tool(target.entry.tool, dict(target.arguments))
    _record_size(sizes, target.entry, outcome)
    return None if outcome.kind is None else outcome.kind.value


async def _dispatched(bench: Bench, mode: str, size: int) -> _Batch:
    calls = [
        ToolCall(f"call-{i}", target.entry.name, target.arguments_json)
        for i, target in enumerate(bench.targets_of(size))
    ]
    results = await collect_tool_calls(
        calls, bench.catalog, bench.handles, mode="sequential" if mode == "sequential" else "parallel"
    )
    failures: Failures = collections.Counter(r.kind.value for r in results if r.kind is not None)
    return _Batch(failures, sum(r.sequential_retry for r in results))


async def run_bench(bench: Bench, *, progress: Progress | None = None) -> BenchResults:
    """Time every mode of ``bench.plan``: per size, warm-up, then ``repeat`` interleaved rounds; the baseline first.

    The baseline (one call alone, per tool) is timed after the first size's warm-up, so the servers are warm.
    """
    plan = bench.plan
    say = progress or (lambda text: None)
    runners = {mode: batch_runner(bench, mode) for mode in plan.modes}
    results = BenchResults(baseline_mode="raw" if "raw" in plan.modes else "actor")
    for position, size in enumerate(plan.sizes):
        for mode, run in runners.items():
            failures = results.warmup_failures.setdefault((size, mode), collections.Counter())
            for _ in range(plan.warmup):
                say(f"N={size} warm-up: {mode}")
                failures.update((await run(size)).failures)
        if position == 0:
            await _measure_baseline(bench, results, say)
        for repetition in range(1, plan.repeat + 1):
            for mode, run in runners.items():
                say(f"N={size} repetition {repetition}/{plan.repeat}: {mode}")
                start = time.perf_counter()
                batch = await run(size)
                elapsed = time.perf_counter() - start
                results.samples.setdefault((size, mode), []).append(elapsed)
                results.failures.setdefault((size, mode), collections.Counter()).update(batch.failures)
                results.retried[(size, mode)] = results.retried.get((size, mode), 0) + batch.retried
    return results


def _record_size(sizes: dict[str, int] | None, entry: CatalogEntry, outcome: ToolOutcome) -> None:
    """Keep the largest result of ``entry``'s tool, in characters of the tool message a model gets."""
    if sizes is not None:
        shown = ToolCallResult(
            "", entry.name, entry.server, entry.tool, "", outcome.result, outcome.error, rich=outcome.rich
        )
        sizes[entry.name] = max(len(tool_message_content(shown)), sizes.get(entry.name, 0))


async def _measure_baseline(bench: Bench, results: BenchResults, say: Progress) -> None:
    """``repeat`` single calls of each tool, one at a time, interleaved over the tools."""
    call = _raw_call if results.baseline_mode == "raw" else _actor_call
    for repetition in range(1, bench.plan.repeat + 1):
        say(f"one call alone, repetition {repetition}/{bench.plan.repeat}")
        for target in bench.targets:
            start = time.perf_counter()
            kind = await call(bench, target, results.result_chars)
            results.baseline.setdefault(target.entry.name, []).append(time.perf_counter() - start)
            if kind is not None:
                results.baseline_failures[kind] += 1
