"""TLS and credentials of a PostgreSQL store URL, written as libpq writes them.

::

    postgresql://cron:password@db:5432/cron?sslmode=verify-full&sslrootcert=/etc/cronwheel/pg-ca.pem
    postgresql://cron@db/cron?sslmode=verify-full&sslrootcert=/ca.pem&sslcert=/me.pem&sslkey=/me.key
    postgresql://cron@db/cron?passfile=/etc/cronwheel/pgpass      (a ~/.pgpass-format file)

``sslmode`` is libpq's: ``disable`` (plain), ``allow`` and ``prefer`` (TLS when the server offers
it, nothing verified), ``require`` (TLS, the server not verified, unless ``sslrootcert`` is given:
then as ``verify-ca``, as libpq does), ``verify-ca`` (the server's chain verified against
``sslrootcert``), ``verify-full`` (and its name: the host of the URL). Without ``sslrootcert``,
``verify-ca`` and ``verify-full`` use the system's trust store (libpq reads ``~/.postgresql/root.crt``;
``sslrootcert=system`` says the same explicitly). ``sslcert``, ``sslkey`` (and ``sslpassword``,
the key's passphrase) are a client certificate, for ``cert`` authentication in ``pg_hba.conf``.

The store's driver is asyncpg, under SQLAlchemy: SQLAlchemy hands every query parameter of the
URL to ``asyncpg.connect`` as a keyword, and asyncpg takes none of these ones that way. So
cronwheel takes them out of the URL (:data:`SSL_PARAMETERS`) and gives asyncpg one ``ssl``
argument instead (:func:`ssl_argument`): an :class:`ssl.SSLContext` built by :mod:`cronwheel.tls`
(every file read at start, an error naming the parameter) or one of asyncpg's mode names. The
job-change listener's own connection gets the same argument. ``passfile`` and ``password`` are
asyncpg keywords already and pass through, as do ``PGPASSWORD``/``PGPASSFILE`` in the environment.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any

from cronwheel.errors import InvalidInputError
from cronwheel.tls import ClientTls, Verify

SSL_PARAMETERS = ("sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword")
SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
_FILES = ("sslrootcert", "sslcert", "sslkey", "sslpassword")


def ssl_argument(query: Mapping[str, str | tuple[str, ...]]) -> ssl.SSLContext | str | None:
    """asyncpg's ``ssl`` argument for a store URL's query (see the module docstring); None when
    the URL says nothing about TLS (asyncpg's own default, as libpq's: ``prefer``)."""
    given = {name: _one(name, query[name]) for name in SSL_PARAMETERS if name in query}
    if not given:
        return None
    mode = given.get("sslmode")
    if mode is not None and mode not in SSL_MODES:
        modes = ", ".join(SSL_MODES)
        raise InvalidInputError(f"store URL parameter sslmode must be one of {modes}, not {mode!r}")
    files = [name for name in _FILES if name in given]
    if mode in (None, "disable", "allow", "prefer"):
        if files:
            raise InvalidInputError(
                f"store URL parameter {files[0]} needs sslmode=require, verify-ca or verify-full"
            )
        return mode
    root = given.get("sslrootcert")
    verify: Verify = "full" if mode == "verify-full" else "ca" if mode == "verify-ca" or root else "none"
    return ClientTls(
        ca=None if root in (None, "system") else root,
        cert=given.get("sslcert"),
        key=given.get("sslkey"),
        key_password=given.get("sslpassword"),
        verify=verify,
        names=("store URL sslrootcert", "store URL sslcert", "store URL sslkey"),
    ).context()


def connect_arguments(query: Mapping[str, str | tuple[str, ...]]) -> dict[str, Any]:
    """The keywords for ``asyncpg.connect`` that the URL's TLS parameters make."""
    argument = ssl_argument(query)
    return {} if argument is None else {"ssl": argument}


def _one(name: str, value: str | tuple[str, ...]) -> str:
    if isinstance(value, str):
        return value
    raise InvalidInputError(f"store URL parameter {name} is given {len(value)} times")
