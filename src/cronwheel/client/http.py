"""The clients: :class:`Client` (blocking) and :class:`AsyncClient` (asyncio), both over httpx and
both with one method per endpoint of :mod:`cronwheel.client.calls` (same names, same arguments).

Listings come two ways: ``list_jobs(...)`` returns one :class:`~cronwheel.client.types.Page`
(``items``, ``next_cursor``), ``iter_jobs(...)`` yields every item, following ``next_cursor``.
An answer of 4xx or 5xx raises the :class:`~cronwheel.client.errors.ApiError` of its status; a
server that cannot be reached raises :class:`~cronwheel.client.errors.ConnectionFailed`.
Redirects are never followed (the token would go with them).
"""

from __future__ import annotations

import functools
import json
import os
import ssl
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

import httpx

from cronwheel import __version__
from cronwheel.client import calls
from cronwheel.client.calls import NO_BODY, Answer, Call
from cronwheel.client.connection import (
    DEFAULT_URL,
    Connection,
    checked_url,
    config_path,
    load_config,
    resolve,
)
from cronwheel.client.errors import ConfigurationError, ConnectionFailed, api_error
from cronwheel.client.types import Page

P = ParamSpec("P")
T = TypeVar("T")
C = TypeVar("C", bound="_Base")

USER_AGENT = f"cronwheel-client/{__version__}"


def tls_context(
    ca_cert: str | None, client_cert: str | None, client_key: str | None
) -> ssl.SSLContext | bool:
    """What httpx verifies the server with: its default (the certifi CAs) unless a CA file or a
    client certificate is given."""
    if ca_cert is None and client_cert is None:
        if client_key is not None:
            raise ConfigurationError("a client key needs its client certificate (client_cert)")
        return True
    try:
        if ca_cert is None:
            import certifi  # noqa: PLC0415 - httpx's own CA bundle, a dependency of httpx

            context = ssl.create_default_context(cafile=certifi.where())
        else:
            context = ssl.create_default_context(cafile=ca_cert)
        if client_cert is not None:
            context.load_cert_chain(client_cert, client_key)
    except (OSError, ssl.SSLError) as error:
        raise ConfigurationError(
            f"cannot load the TLS files ({_files(ca_cert, client_cert, client_key)}): {error}"
        ) from None
    return context


def _files(*paths: str | None) -> str:
    return ", ".join(path for path in paths if path)


def _answer(response: httpx.Response) -> Answer:
    headers = {name.lower(): value for name, value in response.headers.items()}
    data: Any = None
    if response.content:
        if "json" in headers.get("content-type", ""):
            try:
                data = json.loads(response.content)
            except ValueError:
                data = response.text
        else:
            data = response.text
    if response.status_code >= 400:
        raise api_error(response.status_code, data, headers)
    return Answer(response.status_code, headers, data)


def _why(error: httpx.TransportError, timeout: float) -> str:
    if isinstance(error, httpx.TimeoutException):
        return f"no answer within {timeout:g} s"
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        if isinstance(cause, ssl.SSLCertVerificationError):
            return f"TLS: certificate verify failed: {cause.verify_message or cause}"
        if isinstance(cause, ssl.SSLError):
            return f"TLS: {cause.reason or cause}"
        cause = cause.__cause__ or cause.__context__
    return str(error) or type(error).__name__


class _Base:
    """What both clients share: the URL, the token, the TLS settings and the request building."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        ca_cert: str | Path | None = None,
        client_cert: str | Path | None = None,
        client_key: str | Path | None = None,
        source: str | None = None,
    ) -> None:
        self.url = checked_url(url)
        self.token = token
        self.timeout = timeout
        # Where the token came from ("--token", "CRONWHEEL_TOKEN", "context prod", a file): for messages.
        self.source = source or ("argument" if token else "none")
        files = [None if path is None else str(path) for path in (ca_cert, client_cert, client_key)]
        self._verify = tls_context(*files)

    @classmethod
    def from_connection(cls: type[C], connection: Connection, **options: Any) -> C:
        return cls(
            connection.url, connection.token, source=connection.source, ca_cert=connection.ca_cert,
            client_cert=connection.client_cert, client_key=connection.client_key, **options,
        )  # fmt: skip

    @classmethod
    def from_environment(
        cls: type[C],
        url: str | None = None,
        token: str | None = None,
        context: str | None = None,
        *,
        ca_cert: str | None = None,
        client_cert: str | None = None,
        client_key: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        **options: Any,
    ) -> C:
        """The client of the server and token found as the CLI finds them: the arguments, else
        ``CRONWHEEL_URL``/``CRONWHEEL_TOKEN`` (and ``CRONWHEEL_CA_CERT``...), else a context of the
        config file, else a local server's token file (sent to a loopback URL only); see
        :mod:`cronwheel.client.connection`."""
        environment = dict(os.environ if env is None else env)
        found = resolve(
            url=url, token=token, context=context, env=environment,
            config=load_config(config_path(environment)), cwd=cwd or Path.cwd(),
            tls={"ca_cert": ca_cert, "client_cert": client_cert, "client_key": client_key},
        )  # fmt: skip
        return cls.from_connection(found, **options)

    def _options(self, transport: Any) -> dict[str, Any]:
        headers = {"Accept": "application/json, application/problem+json", "User-Agent": USER_AGENT}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        options: dict[str, Any] = {
            "base_url": self.url, "headers": headers, "timeout": self.timeout, "verify": self._verify,
            "follow_redirects": False, "trust_env": False,
        }  # fmt: skip
        if transport is not None:
            options["transport"] = transport
        return options

    @staticmethod
    def _request(call: Call[Any]) -> dict[str, Any]:
        request: dict[str, Any] = {"params": call.params, "headers": dict(call.headers)}
        if call.body is not NO_BODY:
            request["json"] = call.body
        return request

    def _unreachable(self, error: httpx.TransportError) -> ConnectionFailed:
        why = _why(error, self.timeout)
        return ConnectionFailed(f"cannot reach the cronwheel API at {self.url}: {why}", self.url, error)


def _sync(build: Callable[P, Call[T]]) -> Callable[Concatenate[Client, P], T]:
    @functools.wraps(build)
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.send(build(*args, **kwargs))

    return method


def _sync_items(build: Callable[P, Call[Page[T]]]) -> Callable[Concatenate[Client, P], Iterator[T]]:
    @functools.wraps(build)
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        while True:
            page = self.send(build(*args, **kwargs))
            yield from page.items
            if page.next_cursor is None:
                return
            cast(dict[str, Any], kwargs)["cursor"] = page.next_cursor

    method.__doc__ = f"Every item of :meth:`{build.__name__}`, following ``next_cursor``."
    return method


class Client(_Base):
    """A blocking client of the cronwheel API (use it as a context manager, or :meth:`close` it).

    >>> with Client.from_environment() as client:           # doctest: +SKIP
    ...     for job in client.iter_jobs(team="data"):
    ...         print(job["name"], job["next_run_at"])
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        token: str | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        **options: Any,
    ) -> None:
        super().__init__(url, token, **options)
        self._http = httpx.Client(**self._options(transport))

    def send(self, call: Call[T]) -> T:
        """Send one call (the methods below build them); 2xx: its result, else an exception."""
        try:
            response = self._http.request(call.method, call.path, **self._request(call))
        except httpx.TransportError as error:
            raise self._unreachable(error) from None
        return call.read(_answer(response))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    create_job = _sync(calls.create_job)
    validate_job = _sync(calls.validate_job)
    validate_job_edit = _sync(calls.validate_job_edit)
    list_jobs = _sync(calls.list_jobs)
    iter_jobs = _sync_items(calls.list_jobs)
    get_job = _sync(calls.get_job)
    replace_job = _sync(calls.replace_job)
    update_job = _sync(calls.update_job)
    delete_job = _sync(calls.delete_job)
    pause_job = _sync(calls.pause_job)
    resume_job = _sync(calls.resume_job)
    trigger_job = _sync(calls.trigger_job)
    backfill_job = _sync(calls.backfill_job)
    job_backfills = _sync(calls.job_backfills)
    get_backfill = _sync(calls.get_backfill)
    cancel_backfill = _sync(calls.cancel_backfill)
    list_job_runs = _sync(calls.list_job_runs)
    iter_job_runs = _sync_items(calls.list_job_runs)
    list_runs = _sync(calls.list_runs)
    iter_runs = _sync_items(calls.list_runs)
    get_run = _sync(calls.get_run)
    get_run_output = _sync(calls.get_run_output)
    preview_schedule = _sync(calls.preview_schedule)
    cluster_status = _sync(calls.cluster_status)
    upcoming_fires = _sync(calls.upcoming_fires)
    create_token = _sync(calls.create_token)
    list_audit = _sync(calls.list_audit)
    iter_audit = _sync_items(calls.list_audit)
    list_tokens = _sync(calls.list_tokens)
    iter_tokens = _sync_items(calls.list_tokens)
    get_token = _sync(calls.get_token)
    revoke_token = _sync(calls.revoke_token)
    list_calendars = _sync(calls.list_calendars)
    iter_calendars = _sync_items(calls.list_calendars)
    get_calendar = _sync(calls.get_calendar)
    create_calendar = _sync(calls.create_calendar)
    replace_calendar = _sync(calls.replace_calendar)
    delete_calendar = _sync(calls.delete_calendar)
    list_secrets = _sync(calls.list_secrets)
    iter_secrets = _sync_items(calls.list_secrets)
    get_secret = _sync(calls.get_secret)
    set_secret = _sync(calls.set_secret)
    delete_secret = _sync(calls.delete_secret)
    reencrypt_secrets = _sync(calls.reencrypt_secrets)
    get_team_notifications = _sync(calls.get_team_notifications)
    set_team_notifications = _sync(calls.set_team_notifications)
    send_test_notification = _sync(calls.send_test_notification)
    get_job_notifications = _sync(calls.get_job_notifications)
    set_job_notifications = _sync(calls.set_job_notifications)
    delete_job_notifications = _sync(calls.delete_job_notifications)
    health = _sync(calls.health)
    ready = _sync(calls.ready)
    metrics = _sync(calls.metrics)
    openapi = _sync(calls.openapi)


def _async(build: Callable[P, Call[T]]) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, T]]:
    @functools.wraps(build)
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.send(build(*args, **kwargs))

    return method


def _async_items(
    build: Callable[P, Call[Page[T]]],
) -> Callable[Concatenate[AsyncClient, P], AsyncIterator[T]]:
    @functools.wraps(build)
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> AsyncIterator[T]:
        while True:
            page = await self.send(build(*args, **kwargs))
            for item in page.items:
                yield item
            if page.next_cursor is None:
                return
            cast(dict[str, Any], kwargs)["cursor"] = page.next_cursor

    method.__doc__ = f"Every item of :meth:`{build.__name__}`, following ``next_cursor``."
    return method


class AsyncClient(_Base):
    """The same methods as :class:`Client`, awaited (``iter_*`` are async iterators)."""

    def __init__(
        self,
        url: str = DEFAULT_URL,
        token: str | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        **options: Any,
    ) -> None:
        super().__init__(url, token, **options)
        self._http = httpx.AsyncClient(**self._options(transport))

    async def send(self, call: Call[T]) -> T:
        try:
            response = await self._http.request(call.method, call.path, **self._request(call))
        except httpx.TransportError as error:
            raise self._unreachable(error) from None
        return call.read(_answer(response))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    create_job = _async(calls.create_job)
    validate_job = _async(calls.validate_job)
    validate_job_edit = _async(calls.validate_job_edit)
    list_jobs = _async(calls.list_jobs)
    iter_jobs = _async_items(calls.list_jobs)
    get_job = _async(calls.get_job)
    replace_job = _async(calls.replace_job)
    update_job = _async(calls.update_job)
    delete_job = _async(calls.delete_job)
    pause_job = _async(calls.pause_job)
    resume_job = _async(calls.resume_job)
    trigger_job = _async(calls.trigger_job)
    backfill_job = _async(calls.backfill_job)
    job_backfills = _async(calls.job_backfills)
    get_backfill = _async(calls.get_backfill)
    cancel_backfill = _async(calls.cancel_backfill)
    list_job_runs = _async(calls.list_job_runs)
    iter_job_runs = _async_items(calls.list_job_runs)
    list_runs = _async(calls.list_runs)
    iter_runs = _async_items(calls.list_runs)
    get_run = _async(calls.get_run)
    get_run_output = _async(calls.get_run_output)
    preview_schedule = _async(calls.preview_schedule)
    cluster_status = _async(calls.cluster_status)
    upcoming_fires = _async(calls.upcoming_fires)
    create_token = _async(calls.create_token)
    list_audit = _async(calls.list_audit)
    iter_audit = _async_items(calls.list_audit)
    list_tokens = _async(calls.list_tokens)
    iter_tokens = _async_items(calls.list_tokens)
    get_token = _async(calls.get_token)
    revoke_token = _async(calls.revoke_token)
    list_calendars = _async(calls.list_calendars)
    iter_calendars = _async_items(calls.list_calendars)
    get_calendar = _async(calls.get_calendar)
    create_calendar = _async(calls.create_calendar)
    replace_calendar = _async(calls.replace_calendar)
    delete_calendar = _async(calls.delete_calendar)
    list_secrets = _async(calls.list_secrets)
    iter_secrets = _async_items(calls.list_secrets)
    get_secret = _async(calls.get_secret)
    set_secret = _async(calls.set_secret)
    delete_secret = _async(calls.delete_secret)
    reencrypt_secrets = _async(calls.reencrypt_secrets)
    get_team_notifications = _async(calls.get_team_notifications)
    set_team_notifications = _async(calls.set_team_notifications)
    send_test_notification = _async(calls.send_test_notification)
    get_job_notifications = _async(calls.get_job_notifications)
    set_job_notifications = _async(calls.set_job_notifications)
    delete_job_notifications = _async(calls.delete_job_notifications)
    health = _async(calls.health)
    ready = _async(calls.ready)
    metrics = _async(calls.metrics)
    openapi = _async(calls.openapi)
