"""Tool samples in the seed's format: one record, or a directory of ``<tool>.jsonl`` files.

A sample record has the seed's fields ``name``, ``input``, ``output`` and
``description`` (or ``metadata.description``, where the seed's files keep it);
other fields are ignored, as the seed ignored them. ``mcpServers.<id>.samples``
gives them inline (an object of lists, checked like the rest of the file) or as
a directory: ``<dir>/<tool>.jsonl``, one record per line (the seed's
``mcps/mapping/<id>/schemes/<tool>.jsonl``). A file is the operator's notes,
not the configuration's structure, so a line that is not a usable record is a
warning naming the file and the line, and the other lines still count. Only the
first :data:`~yao_actors.specs.MAX_SAMPLES_PER_TOOL` good lines of a file are
read: the model never sees more.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from yao_actors.config.values import ValueReader, join_path, type_name
from yao_actors.specs import MAX_SAMPLES_PER_TOOL, Sample
from yao_actors.untrusted import json as untrusted_json

logger = logging.getLogger(__name__)


class SampleFieldError(ValueError):
    """A field of a sample record has the wrong type."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def sample_from_record(record: Mapping[str, Any]) -> Sample:
    """A :class:`Sample` from one record; :class:`SampleFieldError` when ``name`` or the description is no string."""
    name = record.get("name", "")
    if not isinstance(name, str):
        raise SampleFieldError("name", f"expected a string, got {type_name(name)}")
    description = record.get("description", "")
    metadata = record.get("metadata", {})
    if not description and isinstance(metadata, dict) and isinstance(metadata.get("description"), str):
        description = metadata["description"]
    if not isinstance(description, str):
        raise SampleFieldError("description", f"expected a string, got {type_name(description)}")
    return Sample(input=record.get("input"), output=record.get("output"), name=name, description=description)


def read_sample_directory(directory: Path) -> dict[str, tuple[Sample, ...]]:
    """The samples of every ``<tool>.jsonl`` file in ``directory``, by tool name; problems are logged warnings."""
    samples = {}
    for path in sorted(directory.glob("*.jsonl")):
        if not path.is_dir() and (found := _read_sample_file(path)):
            samples[path.stem] = found
    return samples


def _read_sample_file(path: Path) -> tuple[Sample, ...]:
    samples: list[Sample] = []
    try:
        with path.open("rb") as file:
            for number, raw in enumerate(file, start=1):
                if len(samples) == MAX_SAMPLES_PER_TOOL:
                    break
                try:
                    sample = _sample_of_line(raw)
                except ValueError as problem:
                    logger.warning("samples: %s:%d: %s (line skipped)", path, number, problem)
                    continue
                if sample is not None:
                    samples.append(sample)
    except OSError as error:
        logger.warning("samples: %s: cannot read the file: %s", path, error.strerror or error)
    return tuple(samples)


def _sample_of_line(raw: bytes) -> Sample | None:
    """The sample of one line, ``None`` for a blank line; ``ValueError`` saying what is wrong with it."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"not UTF-8 text ({error.reason} at byte {error.start})") from None
    if not text.strip():
        return None
    try:
        record = untrusted_json.loads_object(text)
    except ValueError as error:
        raise ValueError(f"not a JSON record: {error}") from None
    return sample_from_record(record)


def read_samples(reader: ValueReader, value: Any, path: str, base_dir: Path) -> dict[str, tuple[Sample, ...]]:
    """``samples`` of a server: inline records (checked by ``reader``), or a directory relative to ``base_dir``."""
    if isinstance(value, str) and value:
        directory = base_dir / value
        if not directory.is_dir():
            reader.fail(path, f"not a directory: {str(directory)!r}")
            return {}
        return read_sample_directory(directory)
    if not isinstance(value, dict):
        reader.fail(
            path,
            "expected an object mapping tool names to lists of examples, or a directory of <tool>.jsonl files, "
            f"got {type_name(value)}",
        )
        return {}
    result = {}
    for tool, examples in value.items():
        tool_path = join_path(path, tool)
        if not isinstance(examples, list):
            reader.fail(tool_path, f"expected a list of examples, got {type_name(examples)}")
            continue
        parsed = []
        for i, example in enumerate(examples):
            example_path = join_path(tool_path, i)
            item = reader.obj(example, example_path, ("name", "input", "output", "description", "metadata"))
            if item is None:
                continue
            try:
                parsed.append(sample_from_record(item))
            except SampleFieldError as error:
                reader.fail(join_path(example_path, error.field), error.message)
        result[tool] = tuple(parsed)
    return result
