"""Benchmark: the CPU one run spends on a tool result of 1 KB, 100 KB and 10 MB, before and after the result budget.

Each run is two model calls around one tool call: the OpenAI-compatible model, against the fake endpoint of
``yao_actors.testing`` in a process of its own (``--fake-openai``), asks for ``blob(size)`` on a stdio MCP
server (this script's ``--serve``: a JSON list of records of about ``size`` characters), then answers. The
figure is the CPU time of this process per run (``time.process_time``): the MCP SDK reading the result, the
runtime parsing it, the events, the history, and encoding and sending the model's second request; the
server's and the endpoint's CPU are in their processes and not counted. Beside it, the characters of the
tool message the endpoint received.

``--tree DIR`` (repeatable) measures the same workload with the ``yao_actors`` of another source tree, each in
a subprocess of its own with ``PYTHONPATH=DIR`` (for example ``--tree /work/main`` for the code before the
budget), in one sitting; trees run interleaved, size by size, repetition by repetition. It uses only what
every tree has (``open_runtime``, ``OpenAIModel``, ``StdioTransport``, ``open_fake_openai``). Figures go to
``benchmarks/results/result_sizes.json``. This measures; it asserts nothing.

Run from the repository root: ``python benchmarks/result_sizes.py --tree /path/to/main --tree .``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent

SIZES = {"1KB": 1024, "100KB": 100 * 1024, "10MB": 10 * 1024 * 1024}
REPEATS = {"1KB": 20, "100KB": 10, "10MB": 3}
HERE = Path(__file__).resolve()


def blob_text(size: int) -> str:
    records = []
    total = 2
    while total < size:
        record = json.dumps({"id": len(records), "name": f"item {len(records)}", "tags": ["a", "b"]})
        records.append(record)
        total += len(record) + 1
    return "[" + ",".join(records) + "]"


def serve() -> None:
    """The benchmark's MCP server over stdio: ``blob(size)`` (texts made once per size)."""
    server = MCPServer("blobs")
    made: dict[int, str] = {}

    @server.tool(description="About `size` characters of JSON records.")
    async def blob(size: int) -> CallToolResult:
        text = made.setdefault(size, blob_text(size))
        return CallToolResult(content=[TextContent(type="text", text=text)])

    server.run()


def fake_openai() -> None:
    """The model endpoint: a tool call ``blob(size)`` for a user message ``go <size>``, then ``done``; it prints
    ``LISTENING <base url>`` and the size of each tool message it receives (``SENT <chars>``)."""
    import trio

    from yao_actors.testing import FakeToolCall, Reply, open_fake_openai

    def script(request: Any) -> Reply:
        messages = request.body["messages"]
        fake.requests.clear()  # a run's 10 MB requests are not kept
        if messages[-1]["role"] == "user":
            size = int(messages[-1]["content"].split()[-1])
            return Reply(tool_calls=(FakeToolCall("b__blob", json.dumps({"size": size}), "c1"),))
        print("SENT", len(next(m for m in messages[::-1] if m["role"] == "tool")["content"]), flush=True)
        return Reply(text="done")

    async def main() -> None:
        nonlocal fake
        async with open_fake_openai(script) as fake:
            print("LISTENING", fake.base_url, flush=True)
            await trio.sleep_forever()

    fake: Any = None
    trio.run(main)


def measure(size: int, repeat: int, base_url: str) -> dict[str, Any]:
    """CPU ms per run (each sample)."""
    import trio

    from yao_actors.config import AssistantSpec, Config, ModelSpec, ServerRef, ServerSpec, StdioTransport
    from yao_actors.models.openai import OpenAIModel
    from yao_actors.runtime import open_runtime

    model_spec = ModelSpec(id="m", provider="openai", base_url=base_url, model="fake", api_key_env=None)
    model = OpenAIModel(model_spec)
    spec = ServerSpec("b", StdioTransport(sys.executable, (str(HERE), "--serve")), timeout=120)
    config = Config(servers={"b": spec}, assistants={"a": AssistantSpec("a", "m", servers=(ServerRef("b"),))})
    samples: list[float] = []

    async def main() -> None:
        async with open_runtime(config, models={"m": model}) as runtime:
            await runtime.run("a", f"go {size}")
            for _ in range(repeat):
                started = time.process_time()
                result = await runtime.run("a", f"go {size}")
                samples.append((time.process_time() - started) * 1000)
                if not result.tool_results[0].ok or result.text != "done":
                    raise SystemExit(f"the run failed: {result.tool_results[0].error} {result.note}")

    trio.run(main)
    return {"cpu_ms": samples}


def compare(trees: list[str], sizes: list[str], rounds: int) -> dict[str, Any]:
    results: dict[str, dict[str, Any]] = {
        tree: {size: {"cpu_ms": [], "sent_chars": 0} for size in sizes} for tree in trees
    }
    endpoint = subprocess.Popen([sys.executable, str(HERE), "--fake-openai"], stdout=subprocess.PIPE, text=True)
    assert endpoint.stdout is not None
    try:
        base_url = endpoint.stdout.readline().split()[-1]
        _compare_rounds(trees, sizes, rounds, base_url, endpoint.stdout, results)
    finally:
        endpoint.kill()
        endpoint.wait()
    return results


def _compare_rounds(
    trees: list[str], sizes: list[str], rounds: int, base_url: str, sent: Any, results: dict[str, Any]
) -> None:
    for round_ in range(rounds):
        for size in sizes:
            order = trees if round_ % 2 == 0 else trees[::-1]
            for tree in order:
                env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
                repeat = max(1, REPEATS[size] // rounds)
                out = subprocess.run(
                    [sys.executable, str(HERE), "--measure", size, "--repeat", str(repeat), "--base-url", base_url],
                    env=env, capture_output=True, text=True, check=True, cwd=tree,
                )  # fmt: skip
                got = json.loads(out.stdout.strip().splitlines()[-1])
                results[tree][size]["cpu_ms"] += got["cpu_ms"]
                for _ in range(repeat + 1):  # the warm-up run's, then each timed run's
                    results[tree][size]["sent_chars"] = int(sent.readline().split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--measure", choices=list(SIZES), help=argparse.SUPPRESS)
    parser.add_argument("--repeat", type=int, default=5, help=argparse.SUPPRESS)
    parser.add_argument("--fake-openai", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--tree", action="append", help="a source tree to measure (default: this one)")
    parser.add_argument("--sizes", nargs="+", choices=list(SIZES), default=list(SIZES))
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds (each a subprocess per tree)")
    parser.add_argument("--out", default="benchmarks/results/result_sizes.json")
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    if args.fake_openai:
        fake_openai()
        return
    if args.measure:
        print(json.dumps(measure(SIZES[args.measure], args.repeat, args.base_url)))
        return
    trees = args.tree or [str(HERE.parent.parent)]
    load_start = os.getloadavg()
    results = compare(trees, args.sizes, args.rounds)
    print(f"{'tree':40} {'result':>7} {'CPU ms/run':>11} {'sent to model':>14}")
    for tree in trees:
        for size in args.sizes:
            row = results[tree][size]
            median = statistics.median(row["cpu_ms"])
            print(f"{tree:40} {size:>7} {median:11.2f} {row['sent_chars']:14,}")
    machine = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in load_start],
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    summary = {
        tree: {
            size: {"median_cpu_ms": round(statistics.median(row["cpu_ms"]), 3), **row} for size, row in sizes.items()
        }
        for tree, sizes in results.items()
    }
    Path(args.out).write_text(json.dumps({"machine": machine, "trees": summary}, indent=1) + "\n")


if __name__ == "__main__":
    main()
