"""Backend URLs and request headers as they may be printed or kept: the one place that takes the
credentials out.

A store, queue or coordinator URL may carry a password in its user info
(``postgresql://cron:pw@db/cron``, ``rediss://worker:pw@redis:6380/0``,
``etcd+https://root:pw@etcd:2379``) and secrets in its query (``?password=``,
``?sslpassword=`` for a client key's passphrase, ``?ssl_password=``, tokens). Logs, error
messages, ``cronwheel cluster status`` and the server's start-up lines show :func:`redact_url`'s
form instead: the scheme, the user name, the hosts, the path and the query with every secret value
replaced by ``***``. Paths of certificate and key files are not secrets and stay (an operator
needs them to see what is configured).

:func:`scrub` takes the secrets of one or more URLs out of any text (a driver's error message
that quotes its DSN).

:func:`kept_headers` is what an attempt records of the HTTP request it sent (the run page's
"headers that were sent"): every header, in the order sent, except that the value of a header
that carries a credential by its name (``Authorization``, ``Proxy-Authorization``, ``Cookie``,
``webhook-signature``, names with ``token``, ``secret``, ``password``, ``api-key`` ...), of one
whose value came from a team secret, and of one whose value holds a secret's value anywhere, is
``[redacted]``; bounded (:data:`HEADER_VALUE_CHARS` per value, :data:`MAX_KEPT_HEADERS` headers,
:data:`KEPT_HEADER_CHARS` in all). The headers the target answered with are kept the same way
(``Set-Cookie`` is a credential too). A secret's value never reaches the store this way.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

HIDDEN = "***"
REDACTED = "[redacted]"  # a kept header's value that carried a credential
HEADER_VALUE_CHARS = 512  # a longer kept value is cut, ending with "..."
MAX_KEPT_HEADERS = 64
KEPT_HEADER_CHARS = 16_384  # names and values of the kept headers together; the rest is dropped

# a query parameter whose name contains one of these holds a secret (password, sslpassword,
# ssl_password, passphrase, token, client_secret...); names of files (passfile, sslkey) do not
_SECRET_WORDS = ("password", "passwd", "passphrase", "secret", "token", "credential")
_SECRET_NAMES = frozenset({"pass", "pwd", "auth"})


def secret_parameter(name: str) -> bool:
    """Whether a URL query parameter called ``name`` holds a secret."""
    lowered = name.lower()
    return lowered in _SECRET_NAMES or any(word in lowered for word in _SECRET_WORDS)


# request headers that carry a credential whatever their value: by name, or by a word in the name
_CREDENTIAL_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "cookie", "set-cookie", "set-cookie2", "webhook-signature"}
)
_CREDENTIAL_HEADER_WORDS = ("signature", "api-key", "apikey", "api_key", "session", "auth")


@functools.lru_cache(maxsize=1024)  # the same few names, attempt after attempt
def credential_header(name: str) -> bool:
    """Whether a request or response header called ``name`` carries a credential (its value is
    not kept)."""
    lowered = name.lower()
    return (
        lowered in _CREDENTIAL_HEADERS
        or any(word in lowered for word in _CREDENTIAL_HEADER_WORDS)
        or secret_parameter(lowered)
    )


def kept_headers(
    sent: Iterable[tuple[str, str]], secret_headers: Collection[str] = (), secret_values: Collection[str] = ()
) -> tuple[tuple[str, str], ...]:
    """What may be kept of the request headers ``sent`` (see the module docstring): repeated names
    joined with ``, `` under the first spelling; ``secret_headers`` are the names (any case) whose
    value came from a team secret, ``secret_values`` the values of the attempt's secrets."""
    joined: dict[str, tuple[str, str]] = {}
    for name, value in sent:
        key = name.lower()
        first, before = joined.get(key, (name, ""))
        joined[key] = (first, f"{before}, {value}" if before else value)
    hidden = {name.lower() for name in secret_headers}
    values = [value for value in secret_values if value]
    kept: list[tuple[str, str]] = []
    budget = KEPT_HEADER_CHARS
    for key, (name, value) in joined.items():
        secret = key in hidden or credential_header(name) or any(each in value for each in values)
        shown = REDACTED if secret else _cut(value, HEADER_VALUE_CHARS)
        budget -= len(name) + len(shown)
        if budget < 0 or len(kept) == MAX_KEPT_HEADERS:
            break
        kept.append((name, shown))
    return tuple(kept)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def redact_url(url: str) -> str:
    """``url`` fit for a log line, an error message or a status page: its password and the values
    of its secret query parameters replaced by ``***`` (see the module docstring). Never raises:
    a URL that does not parse is cut down to its scheme."""
    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return _scheme_only(url)
    userinfo, at, hosts = parts.netloc.rpartition("@")
    user, colon, _password = userinfo.partition(":")
    netloc = f"{user}{':' + HIDDEN if colon else ''}@{hosts}" if at else hosts
    if netloc == parts.netloc and not any(secret_parameter(name) for name, _value in query):
        return url  # nothing to hide: as written
    shown = urlencode(
        [(name, HIDDEN if secret_parameter(name) else value) for name, value in query], safe="/*:,"
    )
    slashes = "//" if url[len(parts.scheme) + 1 :].startswith("//") else ""
    fragment = f"#{parts.fragment}" if parts.fragment else ""
    return f"{parts.scheme}:{slashes}{netloc}{parts.path}{'?' if shown else ''}{shown}{fragment}"


def _scheme_only(url: str) -> str:
    scheme, sep, _rest = url.partition("://")
    return f"{scheme}://{HIDDEN}" if sep else HIDDEN


def secrets_of(url: str) -> tuple[str, ...]:
    """The secret strings in ``url`` (its password, secret query values), as written and
    percent-decoded."""
    try:
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
    except ValueError:
        return ()
    found: list[str] = []
    userinfo, at, _hosts = parts.netloc.rpartition("@")
    _user, colon, password = userinfo.partition(":")
    if at and colon and password:
        found += [password, unquote(password)]
    found += [value for name, value in query if value and secret_parameter(name)]
    raw = dict(item.partition("=")[::2] for item in parts.query.split("&") if "=" in item)
    found += [value for name, value in raw.items() if value and secret_parameter(unquote(name))]
    return tuple(sorted({*found, *(quote(each, safe="") for each in found)}, key=len, reverse=True))


def scrub(text: str, *urls: str | None) -> str:
    """``text`` without the secrets of ``urls`` (each replaced by ``***``): for messages of
    drivers and libraries that may quote the URL they were given."""
    for url in urls:
        if url:
            for secret in secrets_of(url):
                text = text.replace(secret, HIDDEN)
    return text
