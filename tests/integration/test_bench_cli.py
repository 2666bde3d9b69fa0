"""``yao-actors bench`` as a user runs it: the installed command, in a directory of its own, over stdio servers.

The config names two real stdio MCP servers: ``a`` (``counting_server.py``,
which writes a line per execution, so the calls the tool really got can be
counted) and ``b`` (the package's test server). What needs no server (``--dry-run``,
a call naming no configured server) is tested in process, in ``tests/test_bench.py``. The figures are checked for
their structure and counts, and for the one comparison a sleeping tool makes
certain: N calls one after another take at least N sleeps, so parallel is
faster than sequential. No wall-clock threshold is asserted.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import sys
from typing import Any

import attrs
import trio

COUNTING_SERVER = pathlib.Path(__file__).with_name("counting_server.py")


@attrs.frozen
class Ran:
    code: int
    stdout: str
    stderr: str


def bench_command() -> list[str]:
    """The installed ``yao-actors`` script, or the same entry point through this Python."""
    script = shutil.which("yao-actors")
    return [script] if script else [sys.executable, "-m", "yao_actors.cli"]


def write_config(directory: pathlib.Path) -> pathlib.Path:
    config = {
        "mcpServers": {
            "a": {
                "command": sys.executable,
                "args": [str(COUNTING_SERVER)],
                "env": {"COUNT_FILE": str(directory / "count.txt")},
                "timeout": 20,
            },
            "b": {"command": sys.executable, "args": ["-m", "yao_actors.testing.servers", "--name", "b"]},
        }
    }
    path = directory / "servers.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


async def bench(directory: pathlib.Path, *args: str, env: dict[str, str] | None = None) -> Ran:
    with trio.fail_after(240):
        done = await trio.run_process(
            [*bench_command(), "bench", "--config", str(write_config(directory)), *args],
            cwd=directory,
            env=env,
            capture_stdout=True,
            capture_stderr=True,
            check=False,
        )
    return Ran(done.returncode, done.stdout.decode(), done.stderr.decode())


def executions(directory: pathlib.Path) -> list[str]:
    path = directory / "count.txt"
    return path.read_text(encoding="utf-8").split() if path.exists() else []


def row(report: dict[str, Any], calls: int, mode: str) -> dict[str, Any]:
    (found,) = [r for r in report["rows"] if r["calls"] == calls and r["mode"] == mode]
    return found


async def test_bench_times_two_servers_writes_json_and_a_readable_plot(tmp_path: pathlib.Path) -> None:
    ran = await bench(
        tmp_path,
        *("--call", "a__sleep", "--call", "b__sleep", "--args", '{"seconds": 0.2}'),
        *("--sweep", "1,4", "--repeat", "2", "--json", "out/figures.json", "--plot", "out/plot.png"),
    )
    assert ran.code == 0, ran.stderr
    report = json.loads((tmp_path / "out" / "figures.json").read_text(encoding="utf-8"))
    assert report["calls"] == [
        {"name": "a__sleep", "server": "a", "tool": "sleep", "arguments": {"seconds": 0.2}},
        {"name": "b__sleep", "server": "b", "tool": "sleep", "arguments": {"seconds": 0.2}},
    ]
    assert report["plan"]["modes"] == ["raw", "parallel", "sequential"]
    assert [(r["calls"], r["mode"]) for r in report["rows"]] == [
        (n, m) for n in (1, 4) for m in ("raw", "parallel", "sequential")
    ]
    for r in report["rows"]:
        assert len(r["samples_ms"]) == 2
        assert r["calls_timed"] == 2 * r["calls"]
        assert (r["failed"], r["failures"]) == (0, {})
        assert r["median_ms"] > 0
        assert r["p95_ms"] >= r["median_ms"]
    # Four 0.2 s sleeps one after another against all four at once.
    assert row(report, 4, "parallel")["median_ms"] < row(report, 4, "sequential")["median_ms"]
    assert row(report, 4, "parallel")["speedup_vs_sequential"] > 1
    assert row(report, 4, "raw")["vs_raw"] == 1.0
    assert report["baseline"]["mode"] == "raw"
    assert sorted(report["baseline"]["by_tool_ms"]) == ["a__sleep", "b__sleep"]
    # The counting server saw exactly the calls the plan announced: warm-up, timed batches and baseline.
    assert executions(tmp_path).count("sleep") == report["plan"]["calls_per_tool"]["a__sleep"]
    # The table on stdout, the progress on stderr.
    assert "median ms" in ran.stdout
    assert "   4 sequential" in ran.stdout
    assert f"{sum(report['plan']['calls_per_tool'].values())} real tool calls, on a, b" in ran.stderr
    assert "bench: N=4 repetition 2/2: sequential" in ran.stderr
    png = (tmp_path / "out" / "plot.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    import matplotlib.image

    image = matplotlib.image.imread(tmp_path / "out" / "plot.png")
    assert image.shape[0] > 100
    assert image.shape[1] > 100


async def test_a_failing_tool_shows_its_failures_per_mode(tmp_path: pathlib.Path) -> None:
    ran = await bench(
        tmp_path,
        *("--call", "a__fail", "--args", '{"message": "没有这个城市"}'),
        *("--calls", "3", "--repeat", "2", "--modes", "raw,parallel,sequential", "--json", "figures.json"),
    )
    assert ran.code == 0, ran.stderr
    report = json.loads((tmp_path / "figures.json").read_text(encoding="utf-8"))
    for mode in ("raw", "parallel", "sequential"):
        assert row(report, 3, mode)["failures"] == {"tool_error": 6}, mode
        assert row(report, 3, mode)["failed"] == 6
    assert row(report, 3, "parallel")["retried_alone"] == 6
    assert report["baseline"]["failures"] == {"tool_error": 2}
    assert "failed calls by kind (timed batches):" in ran.stdout
    assert "N=3 sequential: tool_error 6" in ran.stdout
    assert "6/6" in ran.stdout


async def test_a_bad_call_lists_the_tools_there_are(tmp_path: pathlib.Path) -> None:
    ran = await bench(tmp_path, "--call", "b__slep")
    assert ran.code == 2
    assert "--call b__slep: no such tool" in ran.stderr
    assert "available tools: b__echo, b__add, b__sleep, b__fail" in ran.stderr
    assert "Traceback" not in ran.stderr


async def test_plot_without_a_working_matplotlib_says_how_to_install_it_and_starts_nothing(
    tmp_path: pathlib.Path,
) -> None:
    broken = tmp_path / "site" / "matplotlib"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text('raise ImportError("No module named matplotlib")\n', encoding="utf-8")
    path = os.pathsep.join(filter(None, [str(broken.parent), os.environ.get("PYTHONPATH")]))
    ran = await bench(tmp_path, "--call", "a__sleep", "--plot", "out.png", env={**os.environ, "PYTHONPATH": path})
    assert ran.code == 2
    assert "--plot: matplotlib cannot be imported (No module named matplotlib); install it: " in ran.stderr
    assert "pip install 'yao-actors[plot]'" in ran.stderr
    assert executions(tmp_path) == []
    assert not (tmp_path / "out.png").exists()
