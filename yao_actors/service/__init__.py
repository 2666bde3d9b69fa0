"""The websocket service: protocol, auth and limits, the front end, the chat client and the browser page.

:class:`Service` comes from :mod:`.frontend`, :func:`open_service` and :func:`serve_service` from :mod:`.listening`,
each imported when first used: the chat client reads :mod:`.auth` without importing the service.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from yao_actors.service.frontend import Service, ServiceStatistics
    from yao_actors.service.listening import open_service, serve_service

__all__ = ["Service", "ServiceStatistics", "open_service", "serve_service"]
#: The module each name comes from.
_HOMES = {
    "Service": "frontend",
    "ServiceStatistics": "frontend",
    "open_service": "listening",
    "serve_service": "listening",
}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"yao_actors.service.{_HOMES[name]}"), name)
