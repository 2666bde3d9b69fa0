"""A FastAPI application with yao_actors mounted under ``/yao``: the runtime runs inside FastAPI's own event loop.

Run it with ``pip install fastapi uvicorn wsproto`` and ``python examples/fastapi_app.py`` (``PORT`` picks the port,
8000 by default), then POST AG-UI runs to ``http://127.0.0.1:8000/yao/agui``, connect the websocket client to
``ws://127.0.0.1:8000/yao/`` (``yao-actors chat --url ws://127.0.0.1:8000/yao/ "北京今天适合穿什么?"``), or ask
``http://127.0.0.1:8000/ask?question=...``, a route of the application's own that uses the runtime directly.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

import yao_actors.asgi
import yao_actors.asgi_server
from yao_actors import default_config

yao = yao_actors.asgi.app(default_config())  # or load_config("config.json")


@asynccontextmanager
async def lifespan(_: FastAPI) -> AsyncIterator[None]:
    async with yao.running():  # a mounted application gets no lifespan events: its parent runs it
        yield


api = FastAPI(lifespan=lifespan)
api.mount("/yao", yao)


@api.get("/ask")
async def ask(question: str) -> dict[str, str]:
    assert yao.runtime is not None  # set while yao.running()
    result = await yao.runtime.run("default", question)
    return {"outcome": result.outcome, "text": result.text}


if __name__ == "__main__":  # uvicorn's run, with the service's graceful shutdown before uvicorn's own
    yao_actors.asgi_server.run(api, yao, host="127.0.0.1", port=int(os.environ.get("PORT", "8000")))
