"""The Python client of the cronwheel API (the CLI uses it too); see docs/client.md.

>>> from cronwheel.client import Client, NotFound      # doctest: +SKIP
>>> with Client.from_environment() as client:
...     job = client.get_job("data/nightly")
...     client.update_job(job["id"], {"schedule": "0 4 * * *"}, if_version=job["version"])
"""

from typing import TYPE_CHECKING, Any

from cronwheel.client.connection import DEFAULT_URL, Connection
from cronwheel.client.errors import (
    ApiError,
    BadRequest,
    ClientError,
    ConfigurationError,
    Conflict,
    ConnectionFailed,
    Forbidden,
    HeadersTooLarge,
    Invalid,
    NotFound,
    PayloadTooLarge,
    PreconditionFailed,
    Problem,
    RateLimited,
    RequestRefused,
    ServerError,
    Unauthenticated,
    Unavailable,
)
from cronwheel.client.paging import collect
from cronwheel.client.types import Page, SecretSet, Triggered

if TYPE_CHECKING:
    from cronwheel.client.http import AsyncClient, Client


def __getattr__(name: str) -> Any:
    """``Client`` and ``AsyncClient`` import httpx when first asked for: the CLI's commands that
    make no request (``--help``, ``server``, ``schedule preview``) start without it."""
    if name in ("Client", "AsyncClient"):
        from cronwheel.client import http  # noqa: PLC0415

        return getattr(http, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_URL",
    "ApiError",
    "AsyncClient",
    "BadRequest",
    "Client",
    "ClientError",
    "ConfigurationError",
    "Conflict",
    "Connection",
    "ConnectionFailed",
    "Forbidden",
    "HeadersTooLarge",
    "Invalid",
    "NotFound",
    "Page",
    "PayloadTooLarge",
    "PreconditionFailed",
    "Problem",
    "RateLimited",
    "RequestRefused",
    "SecretSet",
    "ServerError",
    "Triggered",
    "Unauthenticated",
    "Unavailable",
    "collect",
]
