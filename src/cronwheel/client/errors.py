"""What the client raises: one root, :class:`ClientError` (a :class:`~cronwheel.errors.CronwheelError`).

An answer of 4xx or 5xx becomes an :class:`ApiError` carrying the server's RFC 9457 problem
(:class:`Problem`: ``type``, ``title``, ``status``, ``detail``, ``errors`` and the other members),
of the subclass its status names, so that callers catch what they can act on::

    try:
        client.get_job("data/nightly")
    except NotFound:
        ...

A server that cannot be reached is :class:`ConnectionFailed`; a connection that cannot be set up
(a context the config file lacks, an unreadable token file) is :class:`ConfigurationError`.
``str(error)`` is one line per fact: the title, status and detail, then each refused field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from cronwheel.errors import CronwheelError, InvalidInputError, PermanentError, TransientError


class ClientError(CronwheelError):
    """Root of every error of :mod:`cronwheel.client`."""


class ConfigurationError(ClientError, InvalidInputError):
    """The connection cannot be set up as asked (no such context, unreadable file, bad URL)."""


class ConnectionFailed(ClientError, TransientError):  # noqa: N818 - named as the brief and httpx name them
    """The server could not be reached (refused, reset, timed out, TLS failure)."""

    def __init__(self, message: str, url: str, reason: BaseException | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Problem:
    """An RFC 9457 problem as the server answered it."""

    status: int
    title: str
    type: str = "about:blank"
    detail: str | None = None
    errors: tuple[Mapping[str, Any], ...] = ()
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def from_answer(cls, status: int, body: Any) -> Problem:
        """The problem of an answer's body (a body that is not one still makes a problem)."""
        if not isinstance(body, Mapping):
            text = None if body in (None, "") else str(body)[:500]
            return cls(status, f"HTTP {status}", detail=text)
        known = {"type", "title", "status", "detail", "errors"}
        errors = tuple(e for e in body.get("errors") or () if isinstance(e, Mapping))
        detail = body.get("detail")
        return cls(
            status=status,
            title=str(body.get("title") or f"HTTP {status}"),
            type=str(body.get("type") or "about:blank"),
            detail=None if detail is None else str(detail),
            errors=errors,
            extra=MappingProxyType({k: v for k, v in body.items() if k not in known}),
        )

    def describe(self) -> str:
        """``Title (status): detail``, then one indented line per refused field."""
        detail = self.detail
        lines = [f"{self.title} ({self.status})" + (f": {detail}" if detail and detail != self.title else "")]
        for error in self.errors:
            where = error.get("field") or error.get("location") or "request"
            extra = ""
            if error.get("cron_field"):
                extra = f" [{error['cron_field']} field, column {error.get('column', '?')}]"
            line = f"{where}: {error.get('message', 'invalid')}"
            if line != detail or extra:
                lines.append(f"  {line}{extra}")
        return "\n".join(lines)


class ApiError(ClientError):
    """The server refused the request or failed: :attr:`problem` says how."""

    def __init__(self, problem: Problem, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(problem.describe())
        self.problem = problem
        self.headers: Mapping[str, str] = MappingProxyType(dict(headers or {}))

    @property
    def status(self) -> int:
        return self.problem.status


class RequestRefused(ApiError, PermanentError):  # noqa: N818 - HTTP words, as NotFound and Conflict
    """4xx: the request was wrong; sending it again unchanged fails the same way."""


class BadRequest(RequestRefused):
    """400: a header or body the server could not read (a malformed ``If-Match``, JSON)."""


class Unauthenticated(RequestRefused):
    """401: no token, or one that is unknown, expired or revoked."""


class Forbidden(RequestRefused):
    """403: the token may not do this (a scope it lacks, a field it may not set)."""


class NotFound(RequestRefused):
    """404: no such object, or one of a team the token is not of."""


class Conflict(RequestRefused):
    """409: the write conflicts with the stored state (a name taken, a concurrent change)."""


class PreconditionFailed(Conflict):
    """412: the job is no longer at the version ``If-Match`` named: read it again."""


class PayloadTooLarge(RequestRefused):
    """413: the request body is larger than the server accepts."""


class Invalid(RequestRefused):
    """422: input the server refuses whole; :attr:`Problem.errors` names each refused field."""


class HeadersTooLarge(RequestRefused):
    """431: too many or too large request headers."""


def _retry_after(headers: Mapping[str, str], problem: Problem) -> float | None:
    value = headers.get("retry-after") or problem.extra.get("retry_after_s")
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


class RateLimited(RequestRefused):
    """429: too many requests; :attr:`retry_after` says how many seconds to wait."""

    retryable = True

    @property
    def retry_after(self) -> float | None:
        return _retry_after(self.headers, self.problem)


class ServerError(ApiError, TransientError):
    """5xx: the server failed; the request may succeed later."""


class Unavailable(ServerError):  # noqa: N818 - HTTP 503
    """503: a backend is unavailable or the server is not ready; :attr:`retry_after` when given."""

    @property
    def retry_after(self) -> float | None:
        return _retry_after(self.headers, self.problem)


BY_STATUS: Mapping[int, type[ApiError]] = MappingProxyType(
    {
        400: BadRequest,
        401: Unauthenticated,
        403: Forbidden,
        404: NotFound,
        409: Conflict,
        412: PreconditionFailed,
        413: PayloadTooLarge,
        422: Invalid,
        429: RateLimited,
        431: HeadersTooLarge,
        503: Unavailable,
    }
)


def api_error(status: int, body: Any, headers: Mapping[str, str] | None = None) -> ApiError:
    """The exception of an answer of ``status`` (4xx or 5xx) with ``body``."""
    kind = BY_STATUS.get(status) or (RequestRefused if status < 500 else ServerError)
    return kind(Problem.from_answer(status, body), headers)
