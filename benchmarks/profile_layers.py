"""Where a profiled process's CPU goes, by layer: the runtime's own modules, Trio, the MCP SDK, the websocket, JSON.

Reads a cProfile file (``ws_load.py --profile FILE``, or any ``cProfile`` dump) and prints each layer's self time,
in ms per run when ``--runs`` says how many runs the profile covers, with its share of the total. A built-in
or standard-library function (``len``, a socket's ``send``, pydantic-core's validator, ``contextlib``) counts for the
layer that called it, split by caller, so the MCP SDK's validation is the SDK's and a socket write is the layer
that wrote; JSON and logging are layers of their own.

    python benchmarks/ws_load.py --clients 200 --profile /tmp/service.prof
    python benchmarks/profile_layers.py /tmp/service.prof --runs 200

cProfile's own overhead falls on every call, so layers made of many small calls (Trio's scheduler, the runtime's
own code) weigh more here than without the profiler: read the shares, not the milliseconds, and compare
profiles taken the same way.
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
SCHEDULER_LOOP = frozenset({"unrolled_run", "run", "get_events", "process_events", "expire"})
"""Trio's scheduler: its run loop and what the loop itself calls each batch (I/O polling, deadlines)."""
SOCKETS = "socket calls (send, recv: the kernel)"
SOCKET_CALL = "of '_socket.socket' objects"
POLL = "waiting (epoll)"
MAX_CLIMB = 8
"""How many transparent callers a function's time climbs through before it counts as the standard library's."""
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
        if layer == TRIO and key[2] in SCHEDULER_LOOP:
            return SCHEDULER if self.trio_by_caller else TRIO
        if layer == STDLIB or (layer == TRIO and self.trio_by_caller):
            return None
        return layer

    def totals(self) -> dict[str, float]:
        """Self seconds by layer; time that goes to callers is split by what each caller spent in the function,
        climbing through callers whose time goes to their callers too."""
        totals: dict[str, float] = collections.defaultdict(float)
        for key, (_, _, self_time, _, _) in self.stats.items():
            if "poll" in key[2] and "epoll" in key[2]:
                totals[POLL] += self_time
            else:
                self._give(key, self_time, totals, depth=0)
        return totals

    def _give(self, key: Key, seconds: float, totals: dict[str, float], depth: int) -> None:
        layer = self.own_layer(key)
        if layer is not None:
            totals[layer] += seconds
            return
        callers: dict[Key, tuple[int, int, float, float]] = self.stats[key][4] if key in self.stats else {}
        spent = sum(entry[2] for entry in callers.values())
        if not callers or spent <= 0 or depth >= MAX_CLIMB:
            totals[STDLIB if key[0] == "~" else self.layer_of(key)] += seconds
            return
        for caller, entry in callers.items():
            self._give(caller, seconds * entry[2] / spent, totals, depth + 1)


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
