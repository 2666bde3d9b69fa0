"""The websocket service: protocol, auth and limits, the front end, the chat client and the browser page."""

from yao_actors.service.frontend import Service, ServiceStatistics, open_service, serve_service

__all__ = ["Service", "ServiceStatistics", "open_service", "serve_service"]
