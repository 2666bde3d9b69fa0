"""``python -m yao_actors.healthcheck [PID]``: whether the service process ``PID`` (default 1, a container's main
process) answers ``GET /healthz`` with ``200``; exit 0 if so, 1 if not. The image's ``HEALTHCHECK``.

It asks on whatever port the service listens: the listening TCP sockets the process and its children hold (the
workers of ``--workers``) are found in ``/proc``, so the check follows ``--port``, the config's ``server.port`` and
the ``0.0.0.0`` / ``::`` / one-address forms alike, with nothing to keep in step. Linux only (``/proc``); it reads only
processes of its own user, which in the image is the service's.
"""

from __future__ import annotations

import ipaddress
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

#: ``/proc/net/tcp``'s state of a listening socket.
_LISTEN = "0A"
#: Seconds each ``GET /healthz`` may take.
TIMEOUT = 2.0


def process_tree(root: int, proc: Path = Path("/proc")) -> set[int]:
    """``root`` and every process under it."""
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, IndexError, ValueError):
                continue  # gone meanwhile
            children.setdefault(parent, []).append(int(entry.name))
    found, frontier = {root}, [root]
    while frontier:
        for child in children.get(frontier.pop(), ()):
            found.add(child)
            frontier.append(child)
    return found


def socket_inodes(pids: set[int], proc: Path = Path("/proc")) -> set[str]:
    """The inodes of the sockets the processes ``pids`` hold open."""
    inodes = set()
    for pid in pids:
        try:
            links = [os.readlink(fd) for fd in (proc / str(pid) / "fd").iterdir()]
        except OSError:
            continue  # gone, or another user's
        inodes |= {link[8:-1] for link in links if link.startswith("socket:[")}
    return inodes


def listening_addresses(inodes: set[str], proc: Path = Path("/proc")) -> Iterator[tuple[str, int]]:
    """The (host, port) to reach each listening TCP socket among ``inodes`` on: its own address, or loopback for a
    socket listening on every address."""
    for table, family in (("tcp", 4), ("tcp6", 6)):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN or fields[9] not in inodes:
                continue
            address, port = fields[1].split(":")
            yield _host(address, family), int(port, 16)


def _host(hexed: str, family: int) -> str:
    """A ``/proc/net/tcp{,6}`` address (little-endian 32-bit words) as a host to connect to."""
    raw = b"".join(bytes.fromhex(hexed[i : i + 8])[::-1] for i in range(0, len(hexed), 8))
    address = ipaddress.ip_address(raw)
    if address.is_unspecified:
        return "127.0.0.1" if family == 4 else "::1"
    return str(address)


def healthy(host: str, port: int) -> bool:
    """Whether ``GET /healthz`` at ``host:port`` answers 200."""
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through an HTTP_PROXY
    try:
        with direct.open(f"http://{netloc}/healthz", timeout=TIMEOUT) as answer:
            return bool(answer.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = int(args[0]) if args else 1
    addresses = sorted(set(listening_addresses(socket_inodes(process_tree(root)))))
    for host, port in addresses:
        if healthy(host, port):
            return 0
    where = ", ".join(f"{host}:{port}" for host, port in addresses) or "no listening socket"
    print(f"yao-actors: process {root} is not healthy ({where})", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
