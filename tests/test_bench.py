"""``yao_actors.bench``: the plan, the statistics and the table, and runs against the test server in process.

The in-process runs use one ``MCPServer`` object for the actor and the raw
client alike, so its ``stats`` tool counts every execution the benchmark made,
whichever way it went. Nothing here asserts a time.
"""

from __future__ import annotations

import collections
import json
import pathlib
import sys

import mcp
import pytest
import trio
from mcp.server.mcpserver import MCPServer

from yao_actors.bench import BenchCall, BenchPlan, BenchResults, format_table, open_bench, p95, run_bench, summarise
from yao_actors.bench.plan import parse_arguments, parse_modes, parse_sizes, servers_named
from yao_actors.bench.report import build_report, format_result_sizes, one_call_seconds
from yao_actors.cli import main
from yao_actors.config import Config, InMemoryTransport, ServerSpec, StdioTransport
from yao_actors.errors import BenchError
from yao_actors.testing.servers import build_test_server

# --------------------------------------------------------------------------- the plan


def test_a_batch_spreads_over_the_calls_round_robin() -> None:
    a, b, c = BenchCall("s__a"), BenchCall("s__b", {"x": 1}), BenchCall("t__c")
    plan = BenchPlan((a, b, c), sizes=(5,))
    assert plan.batch(5) == [a, b, c, a, b]
    assert plan.batch(1) == [a]


def test_calls_per_tool_counts_warm_up_timed_batches_and_the_baseline() -> None:
    plan = BenchPlan((BenchCall("s__a"), BenchCall("s__b")), sizes=(1, 3), modes=("raw", "parallel"), repeat=4)
    # N=1: a once per batch; N=3: a twice, b once; (1 warm-up + 4 timed) x 2 modes; + 4 baseline calls each.
    assert plan.calls_per_tool() == {"s__a": (1 + 2) * 5 * 2 + 4, "s__b": (0 + 1) * 5 * 2 + 4}
    described = plan.describe("cfg.json", ["s"])
    assert "s__a: 34" in described
    assert "s__b: 14" in described
    assert "all: 48" in described
    assert "servers started: s" in described
    assert "sequential" not in described


def test_a_plan_refuses_what_it_cannot_run_naming_each_option() -> None:
    with pytest.raises(BenchError) as caught:
        BenchPlan((), sizes=(0,), modes=("raw", "fast"), repeat=0)
    problems = caught.value.problems
    assert any(p.startswith("--call:") for p in problems)
    assert any(p.startswith("--calls/--sweep:") for p in problems)
    assert any(p.startswith("--modes:") and "fast" in p and "sequential" in p for p in problems)
    assert any(p.startswith("--repeat:") for p in problems)


def test_arguments_once_for_all_or_once_per_call() -> None:
    assert parse_arguments([], 2) == [{}, {}]
    assert parse_arguments(['{"city": "北京"}'], 3) == [{"city": "北京"}] * 3
    assert parse_arguments(['{"a": 1}', '{"b": 2}'], 2) == [{"a": 1}, {"b": 2}]
    with pytest.raises(BenchError, match="once per --call"):
        parse_arguments(["{}", "{}"], 3)
    with pytest.raises(BenchError, match=r"--args #1: not valid JSON"):
        parse_arguments(["{bad"], 1)
    with pytest.raises(BenchError, match=r"--args #2: must be a JSON object, got list"):
        parse_arguments(["{}", "[1]"], 2)


def test_sizes_modes_and_sweeps() -> None:
    assert parse_sizes(6, None) == (6,)
    assert parse_sizes(6, "4,1,2,4") == (1, 2, 4)
    assert parse_sizes(6, None, for_plot=True) == (1, 2, 4, 6)
    assert parse_sizes(1, None, for_plot=True) == (1,)
    with pytest.raises(BenchError, match="--sweep"):
        parse_sizes(4, "1,two")
    assert parse_modes("sequential, raw,raw") == ("sequential", "raw")


def test_calls_are_matched_to_configured_servers_before_anything_starts() -> None:
    servers = {sid: ServerSpec(sid, StdioTransport("true")) for sid in ("weather", "a.b", "unused")}
    plan = BenchPlan((BenchCall("a_b__get"), BenchCall("weather__get")), sizes=(1,))
    assert servers_named(plan, servers) == ["weather", "a.b"]
    with pytest.raises(BenchError) as caught:
        servers_named(BenchPlan((BenchCall("wether__get"),), sizes=(1,)), servers)
    assert "--call wether__get" in caught.value.problems[0]
    assert "weather, a.b, unused" in caught.value.problems[0]


# --------------------------------------------------------------------------- statistics and the table


def test_p95_is_the_nearest_rank() -> None:
    assert p95([3.0]) == 3.0
    assert p95([5.0, 1.0, 4.0]) == 5.0
    assert p95([float(v) for v in range(1, 21)]) == 19.0
    with pytest.raises(ValueError, match="no values"):
        p95([])


def results_of(samples: dict[str, list[float]], **failures: collections.Counter[str]) -> BenchResults:
    results = BenchResults(baseline={"s__a": [0.1, 0.1, 0.3], "s__b": [0.05]})
    for mode, values in samples.items():
        results.samples[(4, mode)] = values
        results.failures[(4, mode)] = failures.get(mode, collections.Counter())
    return results


def test_rows_put_every_mode_against_one_call_sequential_and_raw() -> None:
    plan = BenchPlan((BenchCall("s__a"),), sizes=(4,), modes=("raw", "parallel", "sequential"), repeat=3)
    results = results_of(
        {"raw": [0.11, 0.1, 0.12], "parallel": [0.2, 0.125, 0.13], "sequential": [0.4, 0.5, 0.45]},
        parallel=collections.Counter({"timeout": 2, "tool_error": 1}),
    )
    results.retried[(4, "parallel")] = 1
    assert one_call_seconds(results) == pytest.approx(0.1)  # the slowest tool's median
    raw, parallel, sequential = summarise(plan, results)
    assert parallel["median_ms"] == pytest.approx(130.0)
    assert parallel["p95_ms"] == pytest.approx(200.0)
    assert parallel["x_one_call"] == pytest.approx(1.3)
    assert parallel["speedup_vs_sequential"] == pytest.approx(3.46)
    assert parallel["efficiency"] == pytest.approx(0.769)
    assert parallel["vs_raw"] == pytest.approx(1.182)
    assert (parallel["calls_timed"], parallel["failed"]) == (12, 3)
    assert parallel["failures"] == {"timeout": 2, "tool_error": 1}
    assert raw["vs_raw"] == 1.0
    assert sequential["speedup_vs_sequential"] == 1.0
    table = format_table([raw, parallel, sequential])
    assert "   3/12" in table
    assert "N=4 parallel: timeout 2, tool_error 1; 1 run again alone after a retryable failure" in table
    assert "N=4 raw" not in table.split("failed calls by kind")[1]


def test_figures_against_a_mode_not_run_are_left_out() -> None:
    plan = BenchPlan((BenchCall("s__a"),), sizes=(4,), modes=("parallel",), repeat=1)
    (row,) = summarise(plan, results_of({"parallel": [0.2]}))
    assert row["vs_raw"] is None
    assert row["speedup_vs_sequential"] is None
    line = format_table([row]).splitlines()[2]
    assert line.split()[5:7] == ["-", "0.50"]  # speedup, efficiency
    assert "failed calls by kind" not in format_table([row])


# --------------------------------------------------------------------------- runs in process


def in_memory(*names: str) -> tuple[Config, dict[str, MCPServer]]:
    servers = {name: build_test_server(name) for name in names}
    specs = {name: ServerSpec(name, InMemoryTransport(server)) for name, server in servers.items()}
    return Config(servers=specs), servers


async def executions(server: MCPServer) -> dict[str, int]:
    """Executions per tool, from the server's own ``stats`` tool."""
    async with mcp.Client(server, mode="legacy") as client:
        result = await client.call_tool("stats", {})
    assert isinstance(result.structured_content, dict), result
    return dict(result.structured_content["calls"])


async def test_a_run_makes_exactly_the_calls_its_plan_says_in_every_mode() -> None:
    config, servers = in_memory("s", "t")
    plan = BenchPlan(
        (BenchCall("s__echo", {"text": "北京"}), BenchCall("t__add", {"a": 1, "b": 2})),
        sizes=(1, 3),
        modes=("raw", "actor", "parallel", "sequential"),
        repeat=2,
    )
    lines: list[str] = []
    with trio.fail_after(30):
        async with open_bench(config, plan) as bench:
            assert [t.entry.server for t in bench.targets] == ["s", "t"]
            results = await run_bench(bench, progress=lines.append)
    expected = plan.calls_per_tool()
    assert (await executions(servers["s"]))["echo"] == expected["s__echo"]
    assert (await executions(servers["t"]))["add"] == expected["t__add"]
    assert sorted(results.samples) == sorted((n, m) for n in (1, 3) for m in plan.modes)
    assert all(len(values) == 2 for values in results.samples.values())
    assert results.result_chars == {"s__echo": len('{"text":"北京"}'), "t__add": len('{"sum":3}')}
    assert all(not failures for failures in results.failures.values())
    assert results.baseline_mode == "raw"
    assert sorted(results.baseline) == ["s__echo", "t__add"]
    assert "N=3 repetition 2/2: sequential" in lines
    assert lines.index("one call alone, repetition 1/2") > lines.index("N=1 warm-up: sequential")
    report = build_report(plan, results, source="memory", calls=[])
    assert [(r["calls"], r["mode"]) for r in report["rows"]] == [(n, m) for n in (1, 3) for m in plan.modes]
    json.dumps(report)  # the document is plain JSON


async def test_failures_are_counted_per_mode_by_kind() -> None:
    config, _ = in_memory("s")
    plan = BenchPlan(
        (BenchCall("s__fail", {"message": "没有这个城市"}), BenchCall("s__echo", {"text": "ok"})),
        sizes=(4,),
        modes=("raw", "actor", "parallel", "sequential"),
        repeat=3,
    )
    with trio.fail_after(30):
        async with open_bench(config, plan) as bench:
            results = await run_bench(bench)
    # Half of every batch fails; the other half succeeds; every timed batch is counted.
    for mode in plan.modes:
        assert results.failures[(4, mode)] == {"tool_error": 2 * 3}, mode
        assert results.warmup_failures[(4, mode)] == {"tool_error": 2}, mode
    # A retryable tool error of a concurrent batch runs again alone (dispatch's own rule), and says so.
    assert results.retried[(4, "parallel")] == 2 * 3
    assert results.retried[(4, "sequential")] == 0
    assert results.baseline_failures == {"tool_error": 3}
    assert "N=4 raw: tool_error 6" in format_table(summarise(plan, results))


async def test_an_unknown_tool_is_refused_listing_the_tools_there_are() -> None:
    config, _ = in_memory("s")
    plan = BenchPlan((BenchCall("s__slep"), BenchCall("s__echo")), sizes=(1,))
    with trio.fail_after(30), pytest.raises(BenchError) as caught:
        async with open_bench(config, plan):
            pytest.fail("the bench started")
    problems = caught.value.problems
    assert problems[0] == "--call s__slep: no such tool"
    assert problems[1].startswith("available tools: s__echo, s__add, s__sleep, s__fail")


async def test_without_raw_the_baseline_goes_through_the_actor() -> None:
    config, servers = in_memory("s")
    plan = BenchPlan((BenchCall("s__echo", {"text": "x"}),), sizes=(2,), modes=("sequential",), repeat=1)
    async with open_bench(config, plan) as bench:
        assert bench.raw_clients == {}
        results = await run_bench(bench)
    assert results.baseline_mode == "actor"
    assert (await executions(servers["s"]))["echo"] == plan.calls_per_tool()["s__echo"]


# --------------------------------------------------------------------------- the command, where it starts nothing


def write_config(directory: pathlib.Path) -> pathlib.Path:
    calls = directory / "calls.txt"
    server = {"command": sys.executable, "args": ["-c", f"open({str(calls)!r}, 'a').write('started')"]}
    path = directory / "servers.json"
    path.write_text(json.dumps({"mcpServers": {"a": server, "b": server}}), encoding="utf-8")
    return path


def test_dry_run_prints_the_plan_and_starts_nothing(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path)
    args = ["--call", "a__sleep", "--call", "b__echo", "--args", '{"seconds": 0.1}', "--args", '{"text": "北京"}']
    code = main(["bench", "--config", str(config), *args, "--calls", "3", "--repeat", "4", "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0
    # N=3 over two tools: a twice and b once per batch; (1 warm-up + 4 timed) x 3 modes; + 4 baseline calls each.
    assert "  a__sleep: 34\n" in out
    assert "  b__echo: 19\n" in out
    assert '  b__echo {"text": "北京"}' in out
    assert f"config: {config}" in out
    assert "servers started: a, b" in out
    assert not (tmp_path / "calls.txt").exists()


def test_a_call_naming_no_server_is_refused_before_anything_starts(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["bench", "--config", str(write_config(tmp_path)), "--call", "c__sleep", "--call", "a__sleep"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err == (
        "yao-actors bench: cannot run the benchmark:\n"
        "  - --call c__sleep: no server of the config is named by it (a call is SERVER__TOOL); servers: a, b\n"
    )
    assert captured.out == ""
    assert not (tmp_path / "calls.txt").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--args", "[1]"], "--args #1: must be a JSON object, got list"),
        (["--repeat", "0"], "--repeat: must be at least 1 (got 0)"),
        (["--modes", "raw,turbo"], "--modes: unknown turbo; choose from raw, actor, parallel, sequential"),
        (["--sweep", "1,x"], "--sweep: comma-separated whole numbers"),
    ],
)
def test_bad_options_exit_2_naming_the_option(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str], options: list[str], message: str
) -> None:
    code = main(["bench", "--config", str(write_config(tmp_path)), "--call", "a__sleep", *options])
    assert code == 2
    assert message in capsys.readouterr().err


def test_a_bad_config_file_exits_2(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"mcpServers": {"a": {"url": 3}}}', encoding="utf-8")
    assert main(["bench", "--config", str(path), "--call", "a__sleep", "--dry-run"]) == 2
    assert "mcpServers.a" in capsys.readouterr().err


def test_result_sizes_mark_the_tools_a_model_sees_cut() -> None:
    text = format_result_sizes({"s__small": 120, "s__flood": 1_258_291}, per_result=32768)
    assert text.splitlines() == [
        "result sizes (characters of the tool message a model gets; over 32,768 it is cut):",
        f"  {'s__flood':<40} {1_258_291:>12,}  over the budget: 1.2 MB, the model sees 32 KB",
        f"  {'s__small':<40} {120:>12,}",
    ]
    assert format_result_sizes({}) == ""
