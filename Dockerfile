# yao_actors service image: `docker build -t yao-actors .`, then
#   docker run -p 8765:8765 -e YAO_ACTORS_TOKEN=<16+ characters> yao-actors
# It listens on all interfaces, so it requires a bearer token (YAO_ACTORS_TOKEN or the config's server.token).
# Mount a config and name it with --config (compose.yaml does); without one it serves the embedded default.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1

WORKDIR /app
COPY pyproject.toml README.md LICENSE ./
COPY yao_actors ./yao_actors
# redis: the shared store of several workers and machines; otel: traces to an OTLP collector.
RUN pip install '.[redis,otel]'

RUN useradd --create-home --uid 10001 yao
USER yao
WORKDIR /home/yao

EXPOSE 8765
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8765/healthz', timeout=2)"]
CMD ["yao-actors", "serve", "--host", "0.0.0.0", "--port", "8765"]
