"""``envFile`` of a stdio server (Cursor's and VS Code's key): a dotenv file whose variables the server gets.

The file is read when the configuration is: ``NAME=value`` lines, ``export NAME=value`` too, ``#`` comments and blank
lines skipped, a value in single quotes taken as written, one in double quotes with ``\\n``, ``\\t``, ``\\"`` and
``\\\\`` decoded, an unquoted one up to a `` #`` comment, without surrounding blanks. Values are not expanded
(``${VAR}`` stays as written, as the editors leave it). A line that is none of these is a problem naming the file and
the line; the entry's own ``env`` wins over the file for a name both set.
"""

from __future__ import annotations

import re
from pathlib import Path

_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*?)\s*$")
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}
#: The largest env file read (a path to something else by mistake is refused, not read into memory whole).
MAX_ENV_FILE_BYTES = 1 << 20


class EnvFileError(ValueError):
    """The file cannot be read, or a line of it is not ``NAME=value``."""


def read_env_file(path: Path) -> dict[str, str]:
    """The variables ``path`` sets, in file order (a later line wins)."""
    try:
        with path.open("rb") as file:
            raw = file.read(MAX_ENV_FILE_BYTES + 1)
    except OSError as error:
        raise EnvFileError(f"cannot read {str(path)!r}: {error.strerror or error}") from None
    if len(raw) > MAX_ENV_FILE_BYTES:
        raise EnvFileError(f"{str(path)!r} is larger than {MAX_ENV_FILE_BYTES} bytes: not an env file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise EnvFileError(f"{str(path)!r} is not UTF-8 text") from None
    variables: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _LINE.match(line)
        value = None if match is None else _value(match.group(2))
        if match is None or value is None:
            raise EnvFileError(f"{str(path)!r} line {number}: expected NAME=value, got {line.strip()!r:.80}")
        variables[match.group(1)] = value
    return variables


def _value(text: str) -> str | None:
    """A line's value as the variable gets it; ``None`` for an unterminated quote."""
    if text[:1] in ("'", '"'):
        quote = text[0]
        end = _closing_quote(text, quote)
        if end is None:
            return None
        inner = text[1:end]
        return inner if quote == "'" else re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), inner)
    return re.split(r"\s#", text, maxsplit=1)[0].rstrip()


def _closing_quote(text: str, quote: str) -> int | None:
    """The index of the quote closing the one at ``text[0]`` (a double-quoted value may escape it), or ``None``."""
    index = 1
    while index < len(text):
        if quote == '"' and text[index] == "\\":
            index += 2
            continue
        if text[index] == quote:
            return index
        index += 1
    return None
