"""The service as an ASGI application, by the path its users run it under (``yao_actors.asgi.app``).

``yao = yao_actors.asgi.app(config)``, served by uvicorn alone or mounted in a FastAPI or Starlette application. It
lives with the rest of the asyncio bridge, in :mod:`yao_actors.aio.asgi` (what it serves and how).
"""

from yao_actors.aio.asgi import AsgiApp, app

__all__ = ["AsgiApp", "app"]
