"""What a request must be before any route sees it: addressed to a host this server serves, and,
when it changes state, not made by another site's page.

A request that repeats a header field of one value (:data:`SINGLETONS`: ``Authorization``,
``Host``, ``Content-Type`` ...) is refused (400) before anything else: parts that read the first
and parts that read another must never disagree on who is calling or what is sent.

Two attacks come from a browser on a machine that can reach the API (docs/security.md):

* **DNS rebinding.** A page on ``rebind.attacker.example`` re-points its name to 127.0.0.1 and
  reads the API as its own origin. Its requests carry ``Host: rebind.attacker.example``: a
  request whose ``Host`` is not served is refused (421) before anything else, and one whose
  ``Host`` is not a host and an optional port (:func:`authority`) is refused (400). Always
  served: IP literals (a page can only have an IP origin by being served from that address) and
  ``localhost`` or ``*.localhost`` (which resolve to loopback only); others are the operator's
  (:attr:`AccessPolicy.allowed_hosts`: the bind name by default, ``--allowed-host``). ``/healthz``
  is served to any host (it says "ok" and nothing else; probes address pods by IP or service name).
* **Cross-site requests.** Any page can make a browser send a "simple" POST (no preflight) with a
  form or ``fetch(..., {mode: "no-cors"})``. A state-changing request (any method but GET, HEAD and
  OPTIONS) is refused unless it carries ``Authorization`` (a header no simple request can carry;
  401), comes from no other site (``Sec-Fetch-Site`` ``same-origin`` or ``none``, ``Origin`` the
  request's own host or an operator-allowed one; 403), and has a JSON body if any (415: forms can
  only send ``application/x-www-form-urlencoded``, ``multipart/form-data`` and ``text/plain``).
  The dashboard's session paths (``/ui/api/...``, ``/ui/session``: :mod:`cronwheel.api.routes.ui`) take
  its CSRF header in place of ``Authorization`` (no simple request can carry either; the dashboard
  checks its value against the session's); ``/v1`` still needs ``Authorization`` and reads no cookie.

The decisions are pure functions (:func:`authority`, :func:`host_allowed`, :func:`refusal`);
:class:`RequestGuard` is the thin ASGI shell around them.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from cronwheel.api.callers.access import AccessPolicy
from cronwheel.api.problems import problem_response

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
ANY_HOST = frozenset({"/healthz", "/v1/healthz"})
# The dashboard's session paths, and the header that stands in for Authorization on them
# (cronwheel.api.routes.ui checks its value; kept here as literals so that the guard imports no route).
UI_SESSION_PATHS = ("/ui/api/", "/ui/session")
UI_CSRF_HEADER = "x-cronwheel-csrf"
_SAME_SITE = frozenset({"same-origin", "none"})
SINGLETONS = {
    "host": "Host",
    "authorization": "Authorization",
    "proxy-authorization": "Proxy-Authorization",
    "content-type": "Content-Type",
    "content-length": "Content-Length",
    "origin": "Origin",
    "sec-fetch-site": "Sec-Fetch-Site",
    UI_CSRF_HEADER: "X-Cronwheel-CSRF",
    "idempotency-key": "Idempotency-Key",
    "if-match": "If-Match",
}
"""Header fields a request may carry once (lower-case name -> its spelling): fields of one value
(RFC 9110, 5.3), and ``If-Match``, a list the API takes one ETag of. Two of them would be read
as the first by one part and as both, or the last, by another: two ``Authorization`` headers,
a valid one first, were served as the first's caller."""


@dataclass(frozen=True, slots=True)
class Refusal:
    status: int
    slug: str
    title: str
    detail: str


_REG_NAME = re.compile(r"[a-z0-9._~-]*")
_PORT = re.compile(r"[0-9]{0,5}")


def authority(text: str) -> tuple[str, str] | None:
    """The host and port of a ``Host`` header (``host [":" port]``, RFC 9110 7.2 and RFC 3986
    3.2.2), lower case, or None for anything else. The host is a name of letters, digits and
    ``-._~`` (an IPv4 address is one), or an IPv6 address in brackets (no zone); the port is
    at most five digits, at most 65535, and may be empty. Not a host: user info
    (``127.0.0.1:80@evil.example``), anything after the brackets (``[::1]evil``), an IPv6
    address without them."""
    text = text.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        host, rest = (text[1:end], text[end + 1 :]) if end > 0 else ("", "!")
        if not _is_ipv6(host):
            return None
    else:
        host, colon, port = text.partition(":")
        rest = colon + port
        if not _REG_NAME.fullmatch(host):
            return None
    port = rest.removeprefix(":")
    if rest[:1] not in ("", ":") or not _PORT.fullmatch(port) or int(port or 0) > 65535:
        return None
    return host, port


def _is_ipv6(host: str) -> bool:
    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        return False
    return "%" not in host


def hostname(text: str) -> str | None:
    """The host of a ``Host`` header, lower case, without port, brackets or a final dot; None
    when it is not a host and port (:func:`authority`)."""
    parts = authority(text)
    return None if parts is None else parts[0].removesuffix(".")


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _matches(host: str, pattern: str) -> bool:
    pattern = pattern.lower().removesuffix(".")
    if pattern.startswith("*."):
        return host.endswith(pattern[1:]) and len(host) > len(pattern) - 1
    return host == pattern


def host_allowed(text: str, allowed: tuple[str, ...]) -> bool:
    """Whether a request for ``text`` (its ``Host``) is served (see the module docstring)."""
    host = hostname(text)
    if host is None:
        return False
    if "*" in allowed:
        return True
    if _is_ip(host) or host == "localhost" or host.endswith(".localhost"):
        return True
    return any(_matches(host, pattern) for pattern in allowed if pattern != "*")


def refusal(method: str, path: str, headers: Mapping[str, str], policy: AccessPolicy) -> Refusal | None:
    """Why the request is refused before routing, or None (``headers``: lower-case names)."""
    host = headers.get("host")
    if host is not None and hostname(host) is None:
        return BAD_HOST
    if host is not None and path not in ANY_HOST and not host_allowed(host, policy.allowed_hosts):
        return Refusal(
            421, "misdirected", "Misdirected request",
            "this server does not serve the host named in Host (see --allowed-host)",
        )  # fmt: skip
    if method.upper() in SAFE_METHODS:
        return None
    return _cross_site(path, headers, policy)


def _cross_site(path: str, headers: Mapping[str, str], policy: AccessPolicy) -> Refusal | None:
    fetch_site = headers.get("sec-fetch-site")
    if fetch_site is not None and fetch_site.lower() not in _SAME_SITE:
        return _forbidden("a state change from another site is refused (Sec-Fetch-Site)")
    origin = headers.get("origin")
    if origin is not None and not _origin_allowed(origin, headers.get("host"), policy):
        return _forbidden("a state change from another origin is refused (Origin is not this server)")
    ui_csrf = path.startswith(UI_SESSION_PATHS) and bool(headers.get(UI_CSRF_HEADER))
    if not headers.get("authorization") and not ui_csrf:
        return Refusal(
            401, "unauthenticated", "Unauthenticated",
            "this endpoint needs a token: send 'Authorization: Bearer <token>'",
        )  # fmt: skip
    if _has_body(headers) and not _is_json(headers.get("content-type", "")):
        return Refusal(
            415, "unsupported-media-type", "Unsupported media type",
            "a request body must be JSON (Content-Type: application/json)",
        )  # fmt: skip
    return None


BAD_HOST = Refusal(400, "bad-host", "Bad request", "the Host header is not a host and an optional port")


def repeated(name: str) -> Refusal:
    """The refusal of a request that repeats the header field ``name`` (its spelling)."""
    return Refusal(400, "bad-header", "Bad request", f"a request has one {name} header")


def _forbidden(detail: str) -> Refusal:
    return Refusal(403, "cross-site", "Forbidden", detail)


def _origin_allowed(origin: str, host: str | None, policy: AccessPolicy) -> bool:
    """Same origin (its authority is the request's ``Host``; the scheme may differ behind a proxy
    that ends TLS), or a page on a host the operator named."""
    parts = urlsplit(origin.strip())
    if not parts.netloc:  # "null": a sandboxed frame, a file, a redirect across origins
        return False
    if host is not None and parts.netloc.lower() == host.strip().lower():
        return True
    named = tuple(pattern for pattern in policy.allowed_hosts if pattern != "*")
    host = hostname(parts.netloc)
    return host is not None and any(_matches(host, pattern) for pattern in named)


def _has_body(headers: Mapping[str, str]) -> bool:
    length = headers.get("content-length", "").strip()
    return "transfer-encoding" in headers or (length not in ("", "0"))


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


def _headers(scope: Scope) -> tuple[dict[str, str], str | None]:
    """The request's headers by lower-case name (the first of each), and the first of
    :data:`SINGLETONS` it repeats (None: none)."""
    headers: dict[str, str] = {}
    twice: str | None = None
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.decode("latin-1").lower()
        if name in headers and name in SINGLETONS and twice is None:
            twice = SINGLETONS[name]
        headers.setdefault(name, raw_value.decode("latin-1"))
    return headers, twice


class RequestGuard:
    """ASGI middleware: answers :func:`refusal`'s problem, or passes the request on."""

    def __init__(self, app: ASGIApp, policy: AccessPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers, twice = _headers(scope)
            method, path = scope["method"], scope["path"]
            refused = repeated(twice) if twice else refusal(method, path, headers, self.policy)
            if refused is not None:
                extra = {"WWW-Authenticate": 'Bearer realm="cronwheel"'} if refused.status == 401 else None
                response = problem_response(
                    Request(scope), refused.status, refused.slug, refused.title, refused.detail, headers=extra
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
