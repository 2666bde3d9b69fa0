"""uvicorn with the service's graceful shutdown, by the path its users import (``yao_actors.asgi_server.run``).

``run(app, yao, host=..., port=...)`` is ``uvicorn.run`` for one process, the service draining its runs before
uvicorn closes their connections. It lives with the rest of the asyncio bridge, in :mod:`yao_actors.aio.asgi_server`.
"""

from yao_actors.aio.asgi_server import GracefulServer, run

__all__ = ["GracefulServer", "run"]
