"""``mcpServers.<id>.samples`` as a directory of ``<tool>.jsonl`` files in the seed's format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from yao_actors.config import Sample, load_config, parse_config
from yao_actors.errors import ConfigError


def line(**record: Any) -> str:
    return json.dumps(record, ensure_ascii=False) + "\n"


def write_config(directory: Path, samples: Any) -> Path:
    path = directory / "config.json"
    entry = {"command": "python", "samples": samples}
    path.write_text(json.dumps({"mcpServers": {"w": entry}, "models": {"demo": {"provider": "demo"}}}))
    return path


def test_each_file_gives_its_tools_samples_in_the_seeds_format(tmp_path: Path) -> None:
    directory = tmp_path / "samples"
    directory.mkdir()
    (directory / "get.jsonl").write_text(
        line(name="bj", input={"city": "北京"}, output={"temp": 3}, description="Chinese names work")
        + "\n"  # blank lines are skipped, as in the seed
        + line(input={"city": "London"}, metadata={"description": "where the seed's files keep it"})
        + line(name="x", input={}, output=None, extra="ignored, as the seed ignored it"),
        encoding="utf-8",
    )
    (directory / "ns.tool.jsonl").write_text(line(name="dotted"), encoding="utf-8")
    (directory / "notes.txt").write_text("not a sample file", encoding="utf-8")
    (directory / "empty.jsonl").write_text("", encoding="utf-8")
    config = load_config(write_config(tmp_path, "samples"))
    assert config.servers["w"].samples == {
        "get": (
            Sample(input={"city": "北京"}, output={"temp": 3}, name="bj", description="Chinese names work"),
            Sample(input={"city": "London"}, description="where the seed's files keep it"),
            Sample(input={}, name="x"),
        ),
        "ns.tool": (Sample(name="dotted"),),
    }


def test_a_relative_directory_is_read_from_the_config_files_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "conf" / "samples").mkdir(parents=True)
    (tmp_path / "conf" / "samples" / "get.jsonl").write_text(line(name="here"), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    config = load_config(write_config(tmp_path / "conf", "samples"))
    assert config.servers["w"].samples == {"get": (Sample(name="here"),)}


def test_at_most_three_samples_of_a_tool_are_read(tmp_path: Path) -> None:
    (tmp_path / "get.jsonl").write_text("".join(line(name=f"s{i}") for i in range(5)) + "{broken", encoding="utf-8")
    config = load_config(write_config(tmp_path, "."))
    assert [s.name for s in config.servers["w"].samples["get"]] == ["s0", "s1", "s2"]


def test_a_malformed_line_is_a_warning_naming_file_and_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "get.jsonl"
    path.write_bytes(
        b"{not json\n"
        + line(name="good").encode()
        + b"[1, 2]\n"
        + line(name=3).encode()
        + b'{"name": "caf\xe9"}\n'
        + line(name="also good", description=["not", "text"]).encode()
        + line(name="last").encode()
    )
    with caplog.at_level("WARNING"):
        config = load_config(write_config(tmp_path, "."))
    assert [s.name for s in config.servers["w"].samples["get"]] == ["good", "last"]
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert warnings == [
        f"samples: {path}:1: not a JSON record: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1) (line skipped)",
        f"samples: {path}:3: not a JSON record: expected a JSON object, got a list (line skipped)",
        f"samples: {path}:4: name: expected a string, got the number 3 (line skipped)",
        f"samples: {path}:5: not UTF-8 text (invalid continuation byte at byte 13) (line skipped)",
        f"samples: {path}:6: description: expected a string, got a list (line skipped)",
    ]


def test_an_unreadable_file_is_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "get.jsonl").mkdir()  # a directory named like a sample file is skipped
    (tmp_path / "add.jsonl").symlink_to(tmp_path / "nowhere")
    with caplog.at_level("WARNING"):
        config = load_config(write_config(tmp_path, "."))
    assert config.servers["w"].samples == {}
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        f"samples: {tmp_path / 'add.jsonl'}: cannot read the file: No such file or directory"
    ]


@pytest.mark.parametrize(
    ("samples", "expected"),
    [
        ("missing", "mcpServers.w.samples: not a directory: '{dir}/missing'"),
        ("config.json", "mcpServers.w.samples: not a directory: '{dir}/config.json'"),
        ("", "mcpServers.w.samples: expected an object mapping tool names to lists of examples, or a directory"),
        (["get.jsonl"], "mcpServers.w.samples: expected an object mapping tool names to lists of examples, or a"),
    ],
)
def test_a_samples_value_that_is_no_directory_is_a_config_error(tmp_path: Path, samples: Any, expected: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load_config(write_config(tmp_path, samples))
    (problem,) = refused.value.problems
    assert problem.startswith(expected.format(dir=tmp_path))


def test_inline_samples_still_name_the_key_path_of_a_bad_field() -> None:
    data = {"mcpServers": {"w": {"command": "x", "samples": {"get": [{"name": 1}, {"description": 2}]}}}}
    with pytest.raises(ConfigError) as refused:
        parse_config(data)
    assert refused.value.problems == (
        "mcpServers.w.samples.get[0].name: expected a string, got the number 1",
        "mcpServers.w.samples.get[1].description: expected a string, got the number 2",
    )
