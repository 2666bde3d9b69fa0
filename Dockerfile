# yao_actors service image: `docker build -t yao-actors .`, then
#   docker run -p 8765:8765 -e YAO_ACTORS_TOKEN=<16+ characters> yao-actors
# It listens on all interfaces, so it requires a bearer token (YAO_ACTORS_TOKEN or the config's server.token).
# Mount a config and name it with --config (compose.yaml does); without one it serves the embedded default.
#
# Two images from this file: the default (`full`) has Node (npx) and uv (uvx), so the stdio servers pasted from
# Claude Desktop, Cursor or VS Code configs (`npx -y @modelcontextprotocol/server-...`, `uvx mcp-server-...`) run in
# it; `docker build --target slim -t yao-actors:slim .` is Python only (servers that are Python packages installed in
# the image, `module` servers, and servers at a URL).
#
# Reproducible: base images are pinned by exact version, and the Python packages by constraints.txt (this repository's
# tested versions; deploy/freeze_constraints.py writes it), so an image built next month is the one tested.
FROM node:20.20.2-bookworm-slim AS node
FROM ghcr.io/astral-sh/uv:0.13.9 AS uv

FROM python:3.11.7-slim-bookworm AS slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1

WORKDIR /app
COPY pyproject.toml README.md LICENSE constraints.txt ./
COPY yao_actors ./yao_actors
# redis: the shared store of several workers and machines; otel: traces to an OTLP collector.
RUN pip install -c constraints.txt '.[redis,otel]'

RUN useradd --create-home --uid 10001 yao
USER yao
WORKDIR /home/yao

EXPOSE 8765
# The health check asks the service on whatever port it listens (--port, the config's server.port, --workers):
# yao_actors.healthcheck finds the port from the sockets the container's main process and its children hold.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s CMD ["python", "-m", "yao_actors.healthcheck"]
CMD ["yao-actors", "serve", "--host", "0.0.0.0", "--port", "8765"]

FROM slim AS full
USER root
COPY --from=node /usr/local/bin/node /usr/local/bin/node
COPY --from=node /usr/local/lib/node_modules /usr/local/lib/node_modules
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
    && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
    && node --version && npx --version
COPY --from=uv /uv /uvx /usr/local/bin/
RUN uv --version && uvx --version
USER yao
