"""Where a profiled process's time goes, by layer: the runtime's own modules, Trio, the MCP SDK, the websocket, JSON.

Reads a cProfile file (``ws_load.py --profile FILE``, or any ``cProfile`` dump) and prints each layer's self time,
in ms per run when ``--runs`` says how many runs the profile covers, with its share of the total. A built-in
or standard-library function (``len``, a socket's ``send``, pydantic-core's validator, ``contextlib``) counts for the
layer that called it, split by caller, so the MCP SDK's validation is the SDK's and a socket write is the layer
that wrote; JSON and logging are layers of their own.

    python benchmarks/ws_load.py --clients 200 --profile /tmp/service.prof
    python benchmarks/profile_layers.py /tmp/service.prof --runs 200

cProfile's own overhead falls on every call, so layers made of many small calls (Trio's scheduler, the runtime's
own code) weigh more here than without the profiler: read the shares, not the milliseconds, and compare
profiles taken the same way. cProfile times with the wall clock (its default; a CPU clock costs a system call per
function call): the figures are the time the process spent outside its epoll wait, which is its CPU only while
the machine does not preempt it.
"""

from __future__ import annotations

import argparse
import collections
import pstats
from typing import Any

import attrs

# First match wins: (a path fragment, the layer it belongs to).
LAYERS: tuple[tuple[str, str], ...] = (
    ("yao_actors/testing/", "test server's tools"),
    ("yao_actors/service/", "ours: websocket service"),
    ("yao_actors/conversation/", "ours: conversation"),
    ("yao_actors/store/", "ours: store"),
    ("yao_actors/observability/", "ours: observability"),
    ("yao_actors/models/", "ours: model client"),
    ("yao_actors/", "ours: dispatch, actors, events"),
    ("site-packages/trio/", "Trio"),
    ("site-packages/outcome/", "Trio"),
    ("site-packages/sortedcontainers/", "Trio"),
    ("site-packages/sniffio/", "Trio"),
    ("site-packages/mcp/", "MCP SDK"),
    ("site-packages/mcp_types/", "MCP SDK"),
    ("site-packages/anyio/", "MCP SDK"),
    ("site-packages/pydantic", "MCP SDK"),
    ("site-packages/opentelemetry/", "MCP SDK"),
    ("site-packages/jsonschema", "jsonschema"),
    ("site-packages/referencing/", "jsonschema"),
    ("site-packages/rpds", "jsonschema"),
    ("site-packages/wsproto/", "websocket (wsproto, h11)"),
    ("site-packages/h11/", "websocket (wsproto, h11)"),
    ("site-packages/prometheus_client/", "metrics (prometheus_client)"),
    ("site-packages/ag_ui/", "ag_ui models"),
    ("/json/", "JSON (stdlib)"),
    ("/logging/", "logging (stdlib)"),
    ("site-packages/", "other packages"),
)
STDLIB = "stdlib, other"
TRIO = "Trio"
SCHEDULER = "Trio: the scheduler loop"
SCHEDULER_LOOP = frozenset(
    {
        ("trio/_core/_run.py", "unrolled_run"),
        ("trio/_core/_run.py", "run"),
        ("trio/_core/_run.py", "expire"),
        ("trio/_core/_io_epoll.py", "get_events"),
        ("trio/_core/_io_epoll.py", "process_events"),
    }
)
"""Trio's scheduler, (file, function): its run loop and what the loop calls each batch (I/O polling, deadlines)."""
EPOLL_WAIT = ("~", 0, "<method 'poll' of 'select.epoll' objects>")
SOCKETS = "socket calls (send, recv: the kernel)"
SOCKET_CALL = "of '_socket.socket' objects"
POLL = "waiting (epoll)"
MAX_CLIMB = 8
"""How many callers a function's time climbs through (towards a layer of its own) before it stays where it is."""
Key = tuple[str, int, str]
"""A profiled function as pstats names it: file, line, function (file ``~`` for a built-in)."""


@attrs.frozen
class LayerSplit:
    """How a profile's self time is split into layers.

    ``trio_by_caller``: Trio's time goes to the layer that called into Trio (a cancel scope, a channel, a task's
    switch), except the scheduler loop's own. ``by_module``: each of the runtime's modules is a layer.
    """

    stats: dict[Key, Any]
    trio_by_caller: bool = False
    by_module: bool = False

    def layer_of(self, key: Key) -> str:
        """The layer of a profiled Python function."""
        path = key[0].replace("\\", "/")
        if self.by_module and "yao_actors/" in path and "yao_actors/testing/" not in path:
            return "ours: " + path.rsplit("yao_actors/", 1)[1]
        for fragment, layer in LAYERS:
            if fragment in path:
                return layer
        return STDLIB

    def own_layer(self, key: Key) -> str | None:
        """The layer a function's time stays in, or None when it goes to its callers: a built-in (but a socket
        call), a standard-library function other than JSON's and logging's, and with ``trio_by_caller`` Trio's
        (but its scheduler loop)."""
        if key[0] == "~":
            return SOCKETS if SOCKET_CALL in key[2] else None
        layer = self.layer_of(key)
        if layer == TRIO and is_scheduler(key):
            return SCHEDULER if self.trio_by_caller else TRIO
        if layer == STDLIB or (layer == TRIO and self.trio_by_caller):
            return None
        return layer

    def totals(self) -> dict[str, float]:
        """Self seconds by layer. A function without a layer of its own (:meth:`own_layer`) gives its self time
        to its callers by the self time it spent under each, and time climbing further up (from the functions it
        called) by the time each caller spent below it; a caller already on the way up (recursion, a cycle) takes
        none. cProfile keeps no call stacks, so a climb of more than one level is an estimate."""
        totals: dict[str, float] = collections.defaultdict(float)
        for key, (_, _, self_time, _, _) in self.stats.items():
            if key == EPOLL_WAIT:
                totals[POLL] += self_time
            else:
                self._give(key, self_time, totals, ())
        return totals

    def _give(self, key: Key, seconds: float, totals: dict[str, float], below: tuple[Key, ...]) -> None:
        """Give ``seconds`` (``key``'s own when ``below`` is empty, else of the functions ``below`` it) to a layer."""
        layer = self.own_layer(key)
        if layer is not None:
            totals[layer] += seconds
            return
        on_the_way = (*below, key)
        callers = {
            # pstats' per caller: (calls, primitive calls, self time, cumulative time) of ``key`` called from there
            caller: max(entry[3] - entry[2], 0.0) if below else entry[2]
            for caller, entry in (self.stats[key][4] if key in self.stats else {}).items()
            if caller not in on_the_way
        }
        spent = sum(callers.values())
        if spent <= 0 or len(below) >= MAX_CLIMB:
            totals[STDLIB if key[0] == "~" else self.layer_of(key)] += seconds
            return
        for caller, share in callers.items():
            self._give(caller, seconds * share / spent, totals, on_the_way)


def is_scheduler(key: Key) -> bool:
    """Whether a profiled function is part of Trio's scheduler loop (:data:`SCHEDULER_LOOP`)."""
    path = key[0].replace("\\", "/")
    return any(path.endswith(file) and key[2] == name for file, name in SCHEDULER_LOOP)


def print_layers(totals: dict[str, float], runs: int | None, per: str = "run") -> None:
    working = sum(seconds for layer, seconds in totals.items() if layer != POLL)
    unit = f"ms/{per}" if runs else "s"
    scale = 1000 / runs if runs else 1.0
    print(f"{'layer':40} {unit:>9} {'share':>7}")
    for layer, seconds in sorted(totals.items(), key=lambda item: -item[1]):
        if layer != POLL:
            print(f"{layer:40} {seconds * scale:9.3f} {seconds / working:7.1%}")
    print(f"{'total (without waiting)':40} {working * scale:9.3f}")
    ours = sum(seconds for layer, seconds in totals.items() if layer.startswith("ours"))
    print(f"the runtime's own code: {ours / working:.1%} of the profile's working time")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("profile", help="a cProfile file (pstats format)")
    parser.add_argument("--runs", type=int, help="how many runs the profile covers: figures per run")
    parser.add_argument("--unit", default="run", help="what --runs counts (run, turn, call): the figures' unit")
    parser.add_argument("--by-module", action="store_true", help="split the runtime's own code by module")
    args = parser.parse_args(argv)
    if args.runs is not None and args.runs < 1:
        parser.error("--runs must be at least 1")
    stats = pstats.Stats(args.profile).stats  # type: ignore[attr-defined]
    print_layers(LayerSplit(stats, by_module=args.by_module).totals(), args.runs, args.unit)
    print()
    print("Trio's time given to the layer that called into it (scopes, channels, task switches):")
    print_layers(LayerSplit(stats, trio_by_caller=True, by_module=args.by_module).totals(), args.runs, args.unit)


if __name__ == "__main__":
    main()
