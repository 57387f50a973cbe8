"""Queue URLs: Redis, plain or over TLS, with an ACL user and a password.

::

    redis://host:6379/0                                   plain, no authentication
    redis://:password@host:6379/0                         the default user's password (requirepass)
    rediss://user:password@host:6380/0?ssl_ca_certs=/etc/cronwheel/redis-ca.pem
                                                          TLS, the server verified with this CA
                                                          (and its name), ACL user and password
    rediss://user:password@host:6380/0?ssl_ca_certs=/ca.pem&ssl_certfile=/me.pem&ssl_keyfile=/me.key
                                                          and a client certificate (tls-auth-clients)

The TLS options are redis-py's own URL parameters: ``ssl_ca_certs`` (without it: the system's
trust store), ``ssl_certfile`` and ``ssl_keyfile`` (a client certificate), ``ssl_password`` (the
key's passphrase), ``ssl_cert_reqs`` (``required``, the default; ``none`` turns verification off)
and ``ssl_check_hostname`` (``false``: the chain is verified, not the name). The user and password
are percent-decoded by redis-py.

:func:`check_queue_url` refuses, before any connection, what cannot work: another scheme, a TLS
option on a plain ``redis://`` URL, an ``ssl_*`` parameter redis-py does not know, and a
certificate or key file that cannot be used (:mod:`cronwheel.tls`, naming the parameter). The
URL is only ever shown without its password (:mod:`cronwheel.redaction`).
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from cronwheel.errors import InvalidInputError
from cronwheel.redaction import redact_url
from cronwheel.tls import ClientTls, Verify

TLS_OPTIONS = (
    "ssl_ca_certs",
    "ssl_certfile",
    "ssl_keyfile",
    "ssl_password",
    "ssl_cert_reqs",
    "ssl_check_hostname",
)
_FORM = "redis://[[user]:password@]host:port[/db] or rediss://...[?ssl_ca_certs=...]"


def check_queue_url(url: str) -> None:
    """Refuse a queue URL that cannot work (see the module docstring), saying why, never
    quoting its password; for ``rediss://``, read its certificate files now."""
    try:
        parts = urlsplit(url)
        options = dict(parse_qsl(parts.query, keep_blank_values=True))
    except ValueError:
        raise InvalidInputError(f"queue URL must look like {_FORM}, not {redact_url(url)!r}") from None
    if parts.scheme not in ("redis", "rediss") or not parts.hostname:
        raise InvalidInputError(f"queue URL must look like {_FORM}, not {redact_url(url)!r}")
    tls = {name: value for name, value in options.items() if name.startswith("ssl")}
    unknown = sorted(set(tls) - set(TLS_OPTIONS))
    if unknown:
        raise InvalidInputError(f"queue URL option {unknown[0]!r} is not one of {', '.join(TLS_OPTIONS)}")
    if tls and parts.scheme == "redis":
        raise InvalidInputError(f"queue URL options {', '.join(sorted(tls))} need a rediss:// URL (TLS)")
    if parts.scheme == "rediss":
        client_tls(options).context()


def client_tls(options: dict[str, str]) -> ClientTls:
    """The :class:`ClientTls` that redis-py's ``ssl_*`` options describe."""
    reqs = options.get("ssl_cert_reqs", "required").lower()
    if reqs not in ("required", "none"):
        raise InvalidInputError("queue URL option ssl_cert_reqs must be required or none")
    check_name = options.get("ssl_check_hostname", "true").lower() not in ("false", "0", "no", "n", "off")
    verify: Verify = "none" if reqs == "none" else "full" if check_name else "ca"
    return ClientTls(
        ca=options.get("ssl_ca_certs"),
        cert=options.get("ssl_certfile"),
        key=options.get("ssl_keyfile"),
        key_password=options.get("ssl_password"),
        verify=verify,
        names=("queue URL ssl_ca_certs", "queue URL ssl_certfile", "queue URL ssl_keyfile"),
    )
