"""``--config claude``, ``--config cursor``, ``--config vscode``: another MCP client's file, found where that client
keeps it.

Each name has its places, looked at in order, the first file that exists taken:

- ``claude``: Claude Desktop's ``claude_desktop_config.json`` — ``~/Library/Application Support/Claude/`` on macOS,
  ``%APPDATA%\\Claude\\`` on Windows, ``${XDG_CONFIG_HOME:-~/.config}/Claude/`` elsewhere;
- ``cursor``: the project's ``.cursor/mcp.json`` (in the current directory), then the user's ``~/.cursor/mcp.json``;
- ``vscode``: the workspace's ``.vscode/mcp.json`` (in the current directory), then the user profile's ``mcp.json``
  (``~/Library/Application Support/Code/User/`` on macOS, ``%APPDATA%\\Code\\User\\`` on Windows,
  ``${XDG_CONFIG_HOME:-~/.config}/Code/User/`` elsewhere).

A file in the current directory with one of these names is that file, not the client's. Only the standard library
and attrs: the command line's parser uses :func:`config_file` for every ``--config``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import attrs

#: The clients ``--config`` knows by name, and what each is called when said.
CLIENT_NAMES: Mapping[str, str] = {"claude": "Claude Desktop", "cursor": "Cursor", "vscode": "VS Code"}
#: What ``--help`` says of ``--config``.
CONFIG_HELP = (
    "configuration file, or claude, cursor or vscode for that client's MCP servers where it keeps them "
    "(default: the embedded demo)"
)


class NoClientFile(ValueError):
    """None of the places a client keeps its file has one; the message lists where it looked."""


@attrs.frozen
class Places:
    """Where the clients' files are on this machine: the home and current directories, the platform, and the
    variables (``APPDATA``, ``XDG_CONFIG_HOME``) that move them."""

    home: Path
    cwd: Path
    platform: str = sys.platform
    environ: Mapping[str, str] = attrs.field(factory=dict)

    def user_config(self) -> Path:
        """The directory a desktop application keeps its settings in on this platform."""
        if self.platform == "darwin":
            return self.home / "Library" / "Application Support"
        if self.platform == "win32":
            return Path(self.environ.get("APPDATA") or self.home / "AppData" / "Roaming")
        return Path(self.environ.get("XDG_CONFIG_HOME") or self.home / ".config")

    def candidates(self, client: str) -> list[Path]:
        """The places ``client`` keeps its MCP servers, in the order they are looked at."""
        if client == "claude":
            return [self.user_config() / "Claude" / "claude_desktop_config.json"]
        if client == "cursor":
            return [self.cwd / ".cursor" / "mcp.json", self.home / ".cursor" / "mcp.json"]
        return [self.cwd / ".vscode" / "mcp.json", self.user_config() / "Code" / "User" / "mcp.json"]


def client_file(client: str, places: Places) -> Path:
    """The file ``client`` (a key of :data:`CLIENT_NAMES`) keeps its servers in; :class:`NoClientFile` if none."""
    looked = places.candidates(client)
    for path in looked:
        if path.is_file():
            return path
    where = ", ".join(str(path) for path in looked)
    raise NoClientFile(f"no {CLIENT_NAMES[client]} file found (looked at {where}); give the file's path instead")


def config_argument(text: str, places: Places) -> tuple[str, str | None]:
    """``--config``'s value as a path, and what to say about it: for a client's name, which file was found; a path
    (or a name that is also a file in the current directory) as it is, with nothing to say."""
    if text not in CLIENT_NAMES or (places.cwd / text).exists():
        return text, None
    path = client_file(text, places)
    return str(path), f"--config {text}: reading {CLIENT_NAMES[text]}'s file {path}"


def config_file(text: str) -> str:
    """``--config`` (an ``argparse`` type): a file's path, or a client's name for that client's file, whose path is
    said on standard error; a name with no file is a bad argument saying where it looked."""
    try:
        path, said = config_argument(text, Places(Path.home(), Path.cwd(), environ=os.environ))
    except NoClientFile as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if said is not None:
        print(f"yao-actors: {said}", file=sys.stderr)
    return path
