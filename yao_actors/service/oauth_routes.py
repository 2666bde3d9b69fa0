"""The service's OAuth pages: the authorization server's redirect back, and the service's client metadata.

- ``GET /oauth/callback?state=...&code=...``: finishes a principal's authorization of a server with
  ``auth.identity: "principal"`` (:mod:`yao_actors.auth.callback`), on whichever worker the browser reaches (the
  pending state is in the shared store). ``200`` and a short page telling the person to go back to the app (whose
  ``resume`` then goes on); a missing, wrong, replayed or expired ``state``, or a refusal, is a ``400`` page and
  nothing is stored; an authorization server (or the store) out of reach a ``503`` page. No page shows a token, a
  traceback or the store's address (a Redis URL may hold its password: that is logged, not shown).
- ``GET /oauth/client-metadata.json``: the service's Client ID Metadata Document, when ``server.public_url`` is
  set (404 otherwise); its URL is the service's client id where an authorization server takes one.

Both are open (a browser brings no bearer token); only the config's servers with ``identity: "principal"`` make
the runtime hold a desk (:class:`~yao_actors.auth.desk.AuthorizationDesk`), and without one the routes are
not there.
"""

from __future__ import annotations

import html
import logging
import urllib.parse

import attrs

from yao_actors.auth.callback import CallbackRefused
from yao_actors.auth.desk import CALLBACK_PATH, METADATA_PATH, AuthorizationDesk
from yao_actors.errors import AuthorizationError, StoreUnavailable
from yao_actors.service.http import Exchange, Routes

logger = logging.getLogger(__name__)

_PAGE = "<!doctype html><meta charset=utf-8><title>{title}</title><h1>{title}</h1><p>{text}</p>"


@attrs.frozen
class OAuthRoutes:
    """The OAuth pages of a runtime's :class:`AuthorizationDesk`."""

    desk: AuthorizationDesk

    def add_to(self, routes: Routes) -> None:
        routes.add(CALLBACK_PATH, self.callback)
        if self.desk.public_url is not None:
            routes.add(METADATA_PATH, self.client_metadata)

    async def callback(self, exchange: Exchange) -> None:
        query = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(exchange.request.target).query))
        try:
            done = await self.desk.complete(query)
        except CallbackRefused as refused:
            logger.warning("OAuth callback refused: %s", refused)
            await _page(exchange, 400, "Authorization not completed", str(refused))
            return
        except StoreUnavailable as error:  # its text may name the store's address (a Redis URL with its password)
            logger.warning("OAuth callback failed: %s", error)
            await _page(exchange, 503, "Authorization not completed", "the service's store is out of reach: try again")
            return
        except AuthorizationError as error:
            logger.warning("OAuth callback failed: %s", error)
            await _page(exchange, 503, "Authorization not completed", f"try again shortly: {error}")
            return
        logger.info("principal %r authorized server %r", done.principal, done.server)
        text = f"Access to {done.server!r} is authorized. Go back to your app and resume."
        await _page(exchange, 200, "Authorized", text)

    async def client_metadata(self, exchange: Exchange) -> None:
        await exchange.respond_json(200, self.desk.client_metadata(), [("cache-control", "max-age=300")])


async def _page(exchange: Exchange, status: int, title: str, text: str) -> None:
    body = _PAGE.format(title=html.escape(title), text=html.escape(text)).encode()
    await exchange.respond(status, body, "text/html; charset=utf-8", [("cache-control", "no-store")])
