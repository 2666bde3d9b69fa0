"""What a run leaves behind: the service's resident memory over many runs of 1 MB on one thread (issue 29 defect 3).

The real ``yao-actors serve`` runs in its own process with a ``module`` server whose one tool, ``big__big``, returns
1 MB of fresh text; each run on the one thread asks for it and gets an answer. Two models: ``test`` (the offline
model the service builds itself: it calls every tool once, then answers with what they returned, so its answer is
1 MB too) and ``openai`` (the OpenAI provider against :mod:`yao_actors.testing.fake_openai`, serving in this
process: it calls the tool, then answers "done"). Two stores: memory and SQLite. After each run the script reads the
service's ``VmRSS`` from ``/proc``; it prints the curve and the growth from run ``--base`` to the last, and writes
the figures to ``benchmarks/results/memory_growth.json``.

    python benchmarks/memory_growth.py                      # 300 runs; every model and store
    python benchmarks/memory_growth.py --runs 60 --models test --stores memory

The target (issue 29): after 300 runs, RSS within 20 MB of what it was after the first 10, for every model and
store. :func:`measure` is what ``tests/integration/test_memory_growth.py`` runs with fewer runs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio
from trio_websocket import open_websocket_url

from yao_actors.testing.fake_openai import FakeOpenAI, FakeToolCall, RecordedRequest, Reply, open_fake_openai

#: Bytes of text the tool returns (a websocket event carrying it stays under the client's 16 MiB frames).
RESULT_BYTES = 1_000_000
MODELS = ("test", "openai")
STORES = ("memory", "sqlite")

BIG_TOOLS = f"""
import secrets

from mcp.server.mcpserver import MCPServer

server = MCPServer("big")


@server.tool(description="Return 1 MB of text.")
def big() -> str:
    return secrets.token_hex({RESULT_BYTES // 2})  # fresh text each call: nothing shared between runs
"""


@attrs.define
class Curve:
    """One service's figures: its RSS (MiB) after each run."""

    model: str
    store: str
    rss_mib: list[float] = attrs.field(factory=list)
    seconds: float = 0.0

    def growth(self, base: int) -> float:
        """MiB more after the last run than after run ``base``."""
        return self.rss_mib[-1] - self.rss_mib[base - 1]

    def per_run_kib(self, base: int) -> float:
        """The median growth per run after run ``base``, in KiB (robust to the allocator's steps)."""
        tail = self.rss_mib[base - 1 :]
        steps = [(b - a) * 1024 for a, b in itertools.pairwise(tail)]
        return statistics.median(steps) if steps else 0.0

    def slope_kib(self, base: int) -> float:
        """The least-squares slope of RSS against runs after run ``base``, in KiB per run."""
        ys = self.rss_mib[base - 1 :]
        if len(ys) < 2:
            return 0.0
        xs = range(len(ys))
        mx, my = statistics.fmean(xs), statistics.fmean(ys)
        den = sum((x - mx) ** 2 for x in xs)
        return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den * 1024


def rss_mib(pid: int) -> float:
    """The resident set size of process ``pid`` (``VmRSS``), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def yao_actors_command() -> list[str]:
    script = shutil.which("yao-actors")
    return [script] if script else [sys.executable, "-m", "yao_actors.cli"]


def _fake_model(request: RecordedRequest) -> Reply:
    """The fake endpoint's model: call the tool, then, with its result, answer."""
    messages = request.body.get("messages", [])
    if messages and messages[-1].get("role") == "tool":
        return Reply(text="done", chunk_size=64)
    return Reply(tool_calls=(FakeToolCall("big__big", "{}"),))


def _config(model: str, fake: FakeOpenAI) -> dict[str, Any]:
    models = {"fake": {"provider": "openai", "base_url": fake.base_url, "model": "fake", "max_retries": 0}}
    assistant: dict[str, Any] = {"model": "fake", "mcp": {"servers": ["big"]}}
    if model != "openai":  # the test model calls the (unannotated, so maybe writing) tool only when told to
        assistant |= {"model": "test", "options": {"include_writes": True}}
    return {
        "mcpServers": {"big": {"module": "big_tools:server"}},
        "models": models,
        "assistants": {"default": assistant},
    }


@asynccontextmanager
async def open_service(folder: Path, model: str, store: str, fake: FakeOpenAI) -> AsyncIterator[tuple[int, str]]:
    """``yao-actors serve`` in ``folder`` with ``model`` and ``store``; yields its pid and websocket URL."""
    (folder / "big_tools.py").write_text(BIG_TOOLS)
    (folder / "config.json").write_text(json.dumps(_config(model, fake)))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "YAO_ACTORS_"))}
    env |= {"XDG_STATE_HOME": str(folder), "OPENAI_API_KEY": "fake"}
    command = [*yao_actors_command(), "serve", "--config", "config.json", "--store", store, "--port", "0"]
    command += ["--log-level", "WARNING"]
    process = await trio.lowlevel.open_process(command, cwd=folder, env=env, stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None
        banner = b""
        with trio.fail_after(120):
            while not banner.endswith(b"\n"):
                chunk = await process.stdout.receive_some(1)
                if not chunk:
                    raise RuntimeError(f"the service exited before serving (code {await process.wait()})")
                banner += chunk
        url = banner.decode().split(" on ", 1)[1].split()[0]
        yield process.pid, url
    finally:
        process.terminate()
        with trio.move_on_after(30):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
        if process.stdout is not None:
            await process.stdout.aclose()


async def one_run(ws: Any, thread_id: str) -> int:
    """One run on ``thread_id``; the bytes of the events it got. Raises if it did not end ``RUN_FINISHED``."""
    run_id = uuid.uuid4().hex
    frame = {"type": "run", "threadId": thread_id, "runId": run_id, "messages": [{"role": "user", "content": "go"}]}
    await ws.send_message(json.dumps(frame))
    received = 0
    while True:
        text = await ws.get_message()
        received += len(text)
        event = json.loads(text)
        if event.get("runId") == run_id and event["type"] in ("RUN_FINISHED", "RUN_ERROR"):
            if event["type"] == "RUN_ERROR":
                raise RuntimeError(f"run {run_id} ended {event.get('code')}: {event.get('message')}")
            return received


async def measure(model: str, store: str, runs: int, *, report: Any = None) -> Curve:
    """``runs`` runs of 1 MB on one thread against a fresh service; its RSS after each."""
    curve = Curve(model, store)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="yao-memory-") as folder:
        async with open_fake_openai(_fake_model) as fake, open_service(Path(folder), model, store, fake) as (pid, url):
            thread_id = f"memory-{uuid.uuid4().hex}"
            async with open_websocket_url(url, max_message_size=16 << 20) as ws:
                for number in range(1, runs + 1):
                    received = await one_run(ws, thread_id)
                    assert received > RESULT_BYTES, f"run {number} carried only {received} bytes"
                    fake.requests.clear()  # the fake keeps what it was sent: not the service's memory
                    curve.rss_mib.append(rss_mib(pid))
                    if report is not None:
                        report(curve, number)
    curve.seconds = time.perf_counter() - started
    return curve


def _print_progress(every: int) -> Any:
    def report(curve: Curve, number: int) -> None:
        if number == 1 or number % every == 0:
            print(f"  {curve.model:6} {curve.store:6} run {number:4}: {curve.rss_mib[-1]:8.1f} MiB", flush=True)

    return report


def print_table(curves: Sequence[Curve], base: int) -> None:
    print(
        f"\n{'model':6} {'store':6} {'runs':>5} {'RSS@1':>8} {f'RSS@{base}':>8} {'RSS@end':>8} {'growth':>8}"
        f" {'KiB/run':>8} {'slope':>8} {'s':>6}"
    )
    for c in curves:
        print(
            f"{c.model:6} {c.store:6} {len(c.rss_mib):5} {c.rss_mib[0]:8.1f} {c.rss_mib[base - 1]:8.1f}"
            f" {c.rss_mib[-1]:8.1f} {c.growth(base):+8.1f} {c.per_run_kib(base):8.1f} {c.slope_kib(base):8.1f}"
            f" {c.seconds:6.1f}"
        )
    print(f"(MiB; growth = RSS after the last run - after run {base}; KiB/run the median step; slope least-squares)")


async def main(args: argparse.Namespace) -> None:
    load = os.getloadavg()
    curves: list[Curve] = []
    for model in args.models:
        for store in args.stores:
            print(f"{model} model, {store} store: {args.runs} runs of {RESULT_BYTES:,} bytes on one thread", flush=True)
            curves.append(await measure(model, store, args.runs, report=_print_progress(args.every)))
    print_table(curves, args.base)
    if args.out:
        result = {
            "machine": platform.platform(),
            "python": sys.version.split()[0],
            "load_average_at_start": load,
            "runs": args.runs,
            "base": args.base,
            "result_bytes": RESULT_BYTES,
            "curves": [attrs.asdict(c) | {"growth_mib": c.growth(args.base)} for c in curves],
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"figures in {args.out}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=300, help="runs per service (default: 300)")
    parser.add_argument("--base", type=int, default=10, help="the run growth is measured from (default: 10)")
    parser.add_argument("--every", type=int, default=25, help="print the RSS every this many runs (default: 25)")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES))
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "memory_growth.json", help="figures file"
    )
    return parser


if __name__ == "__main__":
    trio.run(main, _parser().parse_args())
