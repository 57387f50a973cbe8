"""Backend URLs as they may be printed: the one place that takes the credentials out.

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
"""

from __future__ import annotations

from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

HIDDEN = "***"

# a query parameter whose name contains one of these holds a secret (password, sslpassword,
# ssl_password, passphrase, token, client_secret...); names of files (passfile, sslkey) do not
_SECRET_WORDS = ("password", "passwd", "passphrase", "secret", "token", "credential")
_SECRET_NAMES = frozenset({"pass", "pwd", "auth"})


def secret_parameter(name: str) -> bool:
    """Whether a URL query parameter called ``name`` holds a secret."""
    lowered = name.lower()
    return lowered in _SECRET_NAMES or any(word in lowered for word in _SECRET_WORDS)


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
