"""The Dockerfile, compose.yaml, deploy/haproxy.cfg and the compose config agree with one another.

No container engine runs here, so the files are parsed and held to each other: the ports HAProxy binds and reaches,
the service's host and port, the mounted files, and the store the config names.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from yao_actors.config import check_config, load_config

REPO = Path(__file__).resolve().parents[1]
TOKEN = {"YAO_ACTORS_TOKEN": "a-token-of-twenty-chars"}


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((REPO / "compose.yaml").read_text(encoding="utf-8"))
    return data


def option(command: list[str], name: str) -> str:
    assert command.count(name) == 1, command
    return command[command.index(name) + 1]


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """A service's bind mounts: the path in the container → the file in the repository (checked to exist)."""
    found = {}
    for volume in service.get("volumes", []):
        source, target, *_ = volume.split(":")
        if source.startswith("./"):
            assert (REPO / source).is_file(), source
            found[target] = source.removeprefix("./")
    return found


def haproxy() -> tuple[int, list[tuple[str, int]]]:
    """The port HAProxy's frontend binds and the (host, port) of each backend server not commented out."""
    text = (REPO / "deploy" / "haproxy.cfg").read_text(encoding="utf-8")
    lines = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    binds = [int(m.group(1)) for line in lines if (m := re.fullmatch(r"bind :(\d+)", line))]
    servers = [(m.group(1), int(m.group(2))) for line in lines if (m := re.match(r"server \S+ ([\w.-]+):(\d+)", line))]
    assert len(binds) == 1, binds
    assert servers
    return binds[0], servers


def dockerfile_cmd() -> list[str]:
    text = (REPO / "Dockerfile").read_text(encoding="utf-8")
    commands = re.findall(r"^CMD (.+)$", text, flags=re.MULTILINE)
    assert len(commands) == 1, commands
    command: list[str] = json.loads(commands[0])  # exec form: no shell between the signal and the service
    return command


def test_the_dockerfile_serves_on_all_interfaces_at_the_exposed_port() -> None:
    text = (REPO / "Dockerfile").read_text(encoding="utf-8")
    command = dockerfile_cmd()
    assert command[:2] == ["yao-actors", "serve"]
    assert option(command, "--host") == "0.0.0.0"
    assert re.search(rf"^EXPOSE {option(command, '--port')}$", text, flags=re.MULTILINE)
    for source in re.findall(r"^COPY (.+) \S+$", text, flags=re.MULTILINE):
        for name in shlex.split(source):
            assert (REPO / name).exists(), name
    assert re.search(r"pip install '\.\[[^\]]*redis", text), "the compose store is Redis: the image needs the extra"


def test_compose_runs_the_service_haproxy_and_redis_as_haproxy_cfg_describes() -> None:
    services = compose()["services"]
    assert set(services) == {"yao", "haproxy", "redis"}
    yao, proxy = services["yao"], services["haproxy"]
    command = yao["command"]
    assert command[:2] == ["yao-actors", "serve"]
    assert option(command, "--host") == "0.0.0.0"
    assert int(option(command, "--workers")) > 1
    bind, servers = haproxy()
    port = int(option(command, "--port"))
    # haproxy.cfg reaches the service on loopback: HAProxy must share the service container's network ...
    assert servers == [("127.0.0.1", port)]
    assert proxy["network_mode"] == "service:yao"
    assert "ports" not in proxy
    # ... so HAProxy's frontend port is published from the service container, and nothing bypasses HAProxy.
    assert yao["ports"] == [f"{bind}:{bind}"]
    assert mounts(proxy) == {"/usr/local/etc/haproxy/haproxy.cfg": "deploy/haproxy.cfg"}
    assert option(command, "--config") in mounts(yao)
    assert any(item.startswith("YAO_ACTORS_TOKEN=") for item in yao["environment"])


def test_the_compose_config_is_valid_and_its_store_is_the_compose_redis() -> None:
    services = compose()["services"]
    yao = services["yao"]
    config_file = mounts(yao)[option(yao["command"], "--config")]
    config = load_config(REPO / config_file, environ=TOKEN)
    check_config(config)
    assert config.service.token == TOKEN["YAO_ACTORS_TOKEN"]  # required beyond loopback
    assert (config.service.host, config.service.port) == ("0.0.0.0", int(option(yao["command"], "--port")))
    assert config.store is not None
    assert config.store.type == "redis"  # several workers share their threads
    url = urlsplit(config.store.url or "")
    assert url.hostname in services
    redis_command = services[url.hostname]["command"]
    redis_port = int(option(redis_command, "--port")) if "--port" in redis_command else 6379
    assert url.port == redis_port
    assert "redis" in yao["depends_on"]
