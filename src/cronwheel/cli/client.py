"""A small HTTP client for the cronwheel REST API (standard library only: ``urllib``).

Errors become :class:`click.ClickException` subclasses, so every command fails the same way:
the problem's detail (and each refused field) on stderr, exit status 2 for a request the server
refused (4xx), 1 for a server or network failure. Every request carries the token
:mod:`cronwheel.cli.connection` found (``Authorization: Bearer``); a 401 says where it came from.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

import click

from cronwheel.cli.connection import DEFAULT_URL, Connection

USER_AGENT = "cronwheel-cli"

Query = Mapping[str, str | int | bool | Sequence[str] | None]


class ApiProblem(click.ClickException):
    """The server answered with an error (a problem details body)."""

    def __init__(self, status: int, problem: Mapping[str, Any]) -> None:
        self.status = status
        self.problem = dict(problem)
        super().__init__(_describe(status, self.problem))


class RequestRefused(ApiProblem):
    """4xx: the request was wrong (bad input, not found, conflict): exit 2."""

    exit_code = 2


class ServerFailed(ApiProblem):
    """5xx (or anything else unexpected): exit 1."""

    exit_code = 1


def problem_error(status: int, problem: Mapping[str, Any]) -> ApiProblem:
    return RequestRefused(status, problem) if 400 <= status < 500 else ServerFailed(status, problem)


class Unreachable(click.ClickException):
    """The server could not be reached (exit 1)."""

    exit_code = 1


def _describe(status: int, problem: Mapping[str, Any]) -> str:
    title = problem.get("title") or f"HTTP {status}"
    detail = problem.get("detail")
    lines = [f"{title} ({status})" + (f": {detail}" if detail and detail != title else "")]
    for error in problem.get("errors") or []:
        if not isinstance(error, Mapping):
            continue
        where = error.get("field") or error.get("location") or "request"
        extra = ""
        if error.get("cron_field"):
            extra = f" [{error['cron_field']} field, column {error.get('column', '?')}]"
        line = f"{where}: {error.get('message', 'invalid')}"
        if line != detail or extra:
            lines.append(f"  {line}{extra}")
    if problem.get("hint"):
        lines.append(f"  ({problem['hint']})")
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: dict[str, str] = field(default_factory=dict)  # names in lower case
    data: Any = None

    @property
    def version(self) -> int | None:
        """The job version an ``ETag`` header carries."""
        etag = self.headers.get("etag", "").removeprefix("W/").strip('"')
        return int(etag) if etag.isdigit() else None


class ApiClient:
    def __init__(
        self,
        base_url: str = DEFAULT_URL,
        timeout_s: float = 30.0,
        token: str | None = None,
        source: str = "none",
    ) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise click.BadParameter(
                f"{base_url!r} is not an http(s) URL such as {DEFAULT_URL}", param_hint="--url"
            )
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.token = token
        self.source = source  # where the token came from, for the hint of a 401

    @classmethod
    def connect(cls, connection: Connection) -> ApiClient:
        return cls(connection.url, token=connection.token, source=connection.source)

    def get(self, path: str, query: Query | None = None) -> Response:
        return self.request("GET", path, query=query)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: Query | None = None,
        headers: Mapping[str, str] | None = None,
        has_body: bool = False,
    ) -> Response:
        """Send one request; returns the answer for 2xx, raises for the rest."""
        url = self.base_url + path
        if query:
            url += "?" + urllib.parse.urlencode(_query_pairs(query))
        sent = {"Accept": "application/json, application/problem+json", "User-Agent": USER_AGENT}
        if self.token:
            sent["Authorization"] = f"Bearer {self.token}"
        data: bytes | None = None
        if body is not None or has_body:
            data = json.dumps(body).encode()
            sent["Content-Type"] = "application/json"
        sent.update(headers or {})
        request = urllib.request.Request(url, data=data, headers=sent, method=method)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:  # noqa: S310 (checked)
                return _response(answer.status, dict(answer.headers.items()), answer)
        except urllib.error.HTTPError as error:
            response = _response(error.code, dict(error.headers.items()), error)
            problem = response.data if isinstance(response.data, Mapping) else {"detail": str(response.data)}
            if error.code == 401:
                problem = {**problem, "hint": self._token_hint()}
            raise problem_error(error.code, problem) from None
        except urllib.error.URLError as error:
            raise Unreachable(self._unreachable(error.reason)) from None
        except OSError as error:  # refused, reset, timed out
            raise Unreachable(self._unreachable(error)) from None

    def _token_hint(self) -> str:
        if self.source == "none":
            return (
                "no token was sent: pass --token, set CRONWHEEL_TOKEN, or add a context "
                "(cronwheel config set-context); a local `cronwheel server` keeps its admin token "
                "in <database>.token"
            )
        return f"the token from {self.source} was refused"

    def _unreachable(self, reason: object) -> str:
        if isinstance(reason, ConnectionRefusedError):
            why = "connection refused"
        elif isinstance(reason, TimeoutError):
            why = f"no answer within {self.timeout_s:g} s"
        else:
            why = str(getattr(reason, "strerror", None) or reason)
        return (
            f"cannot reach the cronwheel API at {self.base_url}: {why}\n"
            "  (is the server running? Point the CLI at it with --url or CRONWHEEL_URL)"
        )


def _query_pairs(query: Query) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for key, value in query.items():
        if value is None:
            continue
        if isinstance(value, bool):
            pairs.append((key, "true" if value else "false"))
        elif isinstance(value, (str, int)):
            pairs.append((key, str(value)))
        else:
            pairs.extend((key, str(item)) for item in value)
    return pairs


def _response(status: int, headers: dict[str, str], stream: IO[bytes]) -> Response:
    raw = stream.read()
    lowered = {name.lower(): value for name, value in headers.items()}
    data: Any = None
    if raw:
        try:
            data = json.loads(raw)
        except ValueError:
            data = raw.decode(errors="replace")
    return Response(status, lowered, data)
