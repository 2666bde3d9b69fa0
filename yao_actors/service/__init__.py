"""The websocket service: protocol, auth and limits, the front end, the chat client and the browser page.

:class:`Service`, :func:`open_service` and :func:`serve_service` come from :mod:`.frontend`, imported when first
used: the chat client reads :mod:`.auth` without importing the service.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from yao_actors.service.frontend import Service, ServiceStatistics, open_service, serve_service

__all__ = ["Service", "ServiceStatistics", "open_service", "serve_service"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module("yao_actors.service.frontend"), name)
