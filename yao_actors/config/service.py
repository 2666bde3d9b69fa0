"""The configuration reader's service-side sections: ``server`` (where and to whom the service listens) and ``store``
(where threads live between runs)."""

from __future__ import annotations

import urllib.parse
from typing import Any

import attrs

from yao_actors.config.values import ValueReader, join_path
from yao_actors.errors import ConfigError
from yao_actors.specs import ServiceSpec, StoreSpec
from yao_actors.store.spec import parse_store_spec

#: Roles an operator may allow clients to send besides ``user`` (``server.allow_client_roles``).
CLIENT_ROLES = ("system", "developer", "assistant")


class ServiceReader(ValueReader):
    """Reads the ``server`` and ``store`` sections, one message per problem."""

    def tokens(self, value: Any, path: str) -> dict[str, str]:
        """Principal names to tokens, ``${VAR}`` expanded; an empty name or token would let anyone in."""
        tokens = self.string_map(value, path)
        for name, token in tokens.items():
            if not name or not token:
                self.fail(join_path(path, name), "a principal needs a non-empty name and a non-empty token")
        return tokens

    def store(self, value: Any, path: str) -> StoreSpec | None:
        """The ``store`` section; ``${VAR}`` in ``path``, ``url`` (a Redis password, say) and ``secret_key`` is
        expanded."""
        if isinstance(value, dict):
            value = {
                k: self.expand(v, join_path(path, k))
                if k in ("path", "url", "secret_key") and isinstance(v, str)
                else v
                for k, v in value.items()
            }
        try:
            return parse_store_spec(value, path)
        except ConfigError as error:
            for problem in error.problems:
                self.problems.append(problem)
            return None

    def public_url(self, value: Any, path: str) -> str | None:
        """``server.public_url``: an ``http(s)://`` origin, perhaps with a path, no query (``${VAR}`` allowed)."""
        text = self.expanded_string(value, path)
        if not text:
            return None
        parsed = urllib.parse.urlsplit(text)
        if parsed.scheme not in ("http", "https") or not parsed.netloc or parsed.query or parsed.fragment:
            self.fail(path, f"must be the service's http:// or https:// address (no query), got {text!r:.120}")
            return None
        return text.rstrip("/")

    def apps_origin(self, value: Any, path: str) -> str | None:
        """``server.apps_origin``: an ``http(s)://`` origin (no path, query or fragment; ``${VAR}`` allowed)."""
        text = self.expanded_string(value, path)
        if not text:
            return None
        parsed = urllib.parse.urlsplit(text.rstrip("/"))
        if parsed.scheme not in ("http", "https") or not parsed.hostname or parsed.path or parsed.query:
            self.fail(path, f"must be an http:// or https:// origin (scheme://host[:port]), got {text!r:.120}")
            return None
        if parsed.username or parsed.password or parsed.fragment:
            self.fail(path, f"must be an origin without user, password or fragment, got {text!r:.120}")
            return None
        return f"{parsed.scheme}://{parsed.netloc}".lower()

    def service(self, value: Any, path: str) -> ServiceSpec:
        allowed = tuple(a.name for a in attrs.fields(ServiceSpec))
        item = self.obj(value, path, allowed)
        if item is None:
            return ServiceSpec()
        options: dict[str, Any] = {}
        for key, raw in item.items():
            key_path = join_path(path, key)
            if key == "host":
                options[key] = self.string(raw, key_path)
            elif key == "port":
                options[key] = self.integer(raw, key_path, maximum=65535)
            elif key == "token":
                options[key] = None if raw is None else self.expand(self.string(raw, key_path) or "", key_path)
            elif key == "tokens":
                options[key] = self.tokens(raw, key_path)
            elif key in ("allowed_origins", "required_servers"):
                options[key] = self.strings(raw, key_path)
            elif key == "allow_client_roles":
                roles = self.strings(raw, key_path)
                options[key] = tuple(
                    r for i, r in enumerate(roles) if self.choice(r, join_path(key_path, i), CLIENT_ROLES)
                )
            elif key == "public_url":
                options[key] = self.public_url(raw, key_path)
            elif key == "apps_origin":
                options[key] = self.apps_origin(raw, key_path)
            elif key == "detach_grace":  # 0: a run whose client goes away is cancelled at once
                options[key] = self.number(raw, key_path, strict=False)
            elif key == "max_runs_per_principal":  # null: the default share (see ServiceSpec)
                options[key] = None if raw is None else self.integer(raw, key_path, minimum=1)
            elif key in ("idle_timeout", "shutdown_grace"):
                options[key] = self.number(raw, key_path)
            elif key in allowed:
                options[key] = self.integer(raw, key_path, minimum=1)
        clean = {k: v for k, v in options.items() if v is not None or k == "token"}
        return ServiceSpec(**clean)
