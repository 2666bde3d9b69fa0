"""URLs from sources the runtime does not control, before they reach a person: the one rule, in one place.

A server that asks the user to visit a URL (``url_required``), or an app that asks to open a link, names a URL
that a page puts in a link's ``href`` and a terminal prints for the user to open. Anything but a web address is a
way in: ``javascript:`` and ``data:text/html,…`` run script in the page's origin, ``file:`` reads the user's own
disk, and credentials in the authority (``https://bank.example@evil.example/``) dress one host up as another.

The rule (:func:`url_refusal`): a URL reaches a person only when it is ``https:`` with a host, or ``http:`` to a
loopback host (``localhost``, ``127.0.0.0/8``, ``[::1]``: a service on the user's own machine); with no user name
or password in it, no whitespace or control characters (browsers drop some of them, which lets
``java\\tscript:`` through a naive check), no backslash (browsers read it as ``/``), a valid port, and at most
:data:`MAX_URL_LENGTH` characters. Anything else is refused with the reason, for the one who sent it to hear.
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse
from typing import Final

MAX_URL_LENGTH: Final = 8192
"""Longest URL accepted (a longer one is no address a person is asked to visit)."""

#: Whitespace, C0 controls, DEL, C1 controls, and the backslash.
_UNSAFE = re.compile(r"[\x00-\x20\x7f-\x9f\\]")


def url_refusal(url: str) -> str | None:
    """Why ``url`` must not reach a person, or ``None`` when it may (see the module for the rule)."""
    if len(url) > MAX_URL_LENGTH:
        return f"the URL is longer than {MAX_URL_LENGTH} characters"
    if _UNSAFE.search(url):
        return "the URL holds whitespace, a control character or a backslash"
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018  # raises ValueError for a port that is not a number in range
    except ValueError as exc:
        return f"the URL cannot be read: {exc}"
    scheme = parts.scheme.lower()
    if scheme not in ("https", "http"):
        return f"only https: URLs (and http: to this machine) are opened, not {scheme + ':' if scheme else 'this'}"
    if parts.username is not None or parts.password is not None:
        return "the URL carries a user name or password"
    host = parts.hostname
    if not host:
        return "the URL names no host"
    if scheme == "http" and not is_loopback(host):
        return f"http: is opened only to this machine (localhost, 127.0.0.1, [::1]), not {host!r}: use https:"
    return None


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a URL's host, lower case, IPv6 without brackets) is this machine: ``localhost`` or a
    loopback address written as one (``127.0.0.1.evil.example`` is a name, and not this machine)."""
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


__all__ = ["MAX_URL_LENGTH", "is_loopback", "url_refusal"]
