"""The Dockerfile, compose.yaml, deploy/haproxy.cfg and the compose config agree with one another (issue 44, item 7).

No container engine runs here, so the files are parsed and held to each other: the ports HAProxy binds and reaches,
the service's host and port, the mounted files, the store the config names, the images pinned by exact version, the
Python packages by constraints.txt (still this environment's), Node and uv in the full image, a user that is not
root, and a health check with no port of its own. The shipped haproxy.cfg is started with the real HAProxy, under a
hard limit of 4096 open files, in front of a real service.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import trio
import yaml

from tests.integration.scale_support import open_haproxy
from tests.service.fake_runtime import FakeRuntime
from tests.service.support import running_service
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
    for source in re.findall(r"^COPY (?!--from=)(.+) \S+$", text, flags=re.MULTILINE):  # files of the repository
        for name in shlex.split(source):
            assert (REPO / name).exists(), name
    assert re.search(r"pip install (-c constraints\.txt )?'\.\[[^\]]*redis", text), (
        "the compose store is Redis: the image needs the extra"
    )


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


def dockerfile_stages() -> list[tuple[str, str | None, list[str]]]:
    """Each ``FROM image [AS name]`` of the Dockerfile with the instructions of its stage (continuation lines
    joined)."""
    text = (REPO / "Dockerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    stages: list[tuple[str, str | None, list[str]]] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if match := re.fullmatch(r"FROM (\S+)(?: AS (\S+))?", line):
            stages.append((match.group(1), match.group(2), []))
        else:
            stages[-1][2].append(line)
    return stages


def test_every_base_image_is_pinned_by_an_exact_version_or_a_digest() -> None:
    stages = dockerfile_stages()
    names = {name for _, name, _ in stages}
    images = [image for image, _, _ in stages if image not in names]
    images += [service["image"] for service in compose()["services"].values() if "image" in service]
    assert len(images) >= 5  # python, node, uv; haproxy, redis
    for image in images:
        tag = image.rpartition(":")[2]
        assert "@sha256:" in image or re.match(r"\d+\.\d+\.\d+(-[\w.-]+)?$", tag), f"{image}: not an exact version"


def test_the_full_image_has_node_and_uv_and_slim_is_its_base() -> None:
    stages = {name: (image, lines) for image, name, lines in dockerfile_stages()}
    assert list(stages)[-1] == "full"  # the default target
    base, lines = stages["full"]
    assert base == "slim"
    copied = " ".join(line for line in lines if line.startswith("COPY --from="))
    assert "/usr/local/bin/node" in copied
    assert "node_modules" in copied
    assert "/uv /uvx" in copied
    run = " ".join(line for line in lines if line.startswith("RUN"))
    for check in ("node --version", "npx --version", "uv --version", "uvx --version"):
        assert check in run  # the build fails if a tool does not run
    users = [line.split()[1] for _, (_, stage) in stages.items() for line in stage if line.startswith("USER ")]
    assert users[-1] == "yao"  # the service never runs as root
    assert any(f"--uid {10001}" in line for line in stages["slim"][1])


def test_the_image_installs_the_constrained_versions_and_they_are_this_environments() -> None:
    """constraints.txt is what deploy/freeze_constraints.py writes here: the versions this suite runs with."""
    text = (REPO / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^RUN pip install -c constraints\.txt '\.\[redis,otel\]'$", text, flags=re.MULTILINE)
    assert re.search(r"^COPY .*\bconstraints\.txt\b", text, flags=re.MULTILINE)
    frozen = subprocess.run(
        [sys.executable, str(REPO / "deploy" / "freeze_constraints.py")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    pins = [line for line in frozen.splitlines() if not line.startswith("#")]
    assert {"mcp", "trio", "coredis", "opentelemetry-sdk"} <= {line.split("==")[0] for line in pins}
    shipped = (REPO / "constraints.txt").read_text(encoding="utf-8").splitlines()
    assert [line for line in shipped if not line.startswith("#")] == pins, (
        "constraints.txt is not this environment's: run `python deploy/freeze_constraints.py > constraints.txt` "
        "(after testing the upgrade)"
    )


def test_the_health_check_names_no_port_and_the_service_port_is_the_exposed_one() -> None:
    text = (REPO / "Dockerfile").read_text(encoding="utf-8")
    (check,) = re.findall(r"^HEALTHCHECK .* CMD (\[.+\])$", text, flags=re.MULTILINE)
    assert json.loads(check) == ["python", "-m", "yao_actors.healthcheck"]  # finds the port the service listens on
    assert re.findall(r"^EXPOSE (\d+)$", text, flags=re.MULTILINE) == [option(dockerfile_cmd(), "--port")]


@pytest.mark.parametrize("maxconn", [None, 20000])
async def test_the_shipped_haproxy_cfg_starts_with_4096_files_and_reaches_a_service(
    tmp_path: Path, maxconn: int | None
) -> None:
    """As shipped (but its two addresses, on free loopback ports), HAProxy starts under a hard limit of 4096 open
    files and passes ``/readyz`` of a real service; the old ``maxconn 20000`` did not start there."""
    text = (REPO / "deploy" / "haproxy.cfg").read_text(encoding="utf-8").replace("{", "{{").replace("}", "}}")
    _, [(host, port)] = haproxy()
    text = text.replace("bind :8080", "bind 127.0.0.1:{front}").replace(f"{host}:{port}", "127.0.0.1:{back}")
    if maxconn is not None:
        text = re.sub(r"maxconn \d+", f"maxconn {maxconn}", text)
    with trio.fail_after(30):
        async with running_service(FakeRuntime()) as service:
            if maxconn is None:
                async with open_haproxy(tmp_path, text, fd_limit=4096, back=service.port) as url:
                    assert url.startswith("ws://127.0.0.1:")
            else:
                with pytest.raises(AssertionError, match="Cannot raise FD limit"):
                    async with open_haproxy(tmp_path, text, fd_limit=4096, back=service.port):
                        pass
