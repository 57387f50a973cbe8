"""How the API commands print: tables by default, ``-o json`` or ``-o yaml`` for machines, and
the options and file loading every command shares."""

from __future__ import annotations

import functools
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, overload

import click
import yaml

from cronwheel.cli import global_options as shared
from cronwheel.client import connection
from cronwheel.client.errors import (
    ApiError,
    ClientError,
    ConfigurationError,
    ConnectionFailed,
    RequestRefused,
    Unauthenticated,
)

if TYPE_CHECKING:
    from cronwheel.client import Client


class Ctx:
    """What a command is given: the API client (connected when first used, so that a command
    that needs no server reads no config) and the output format."""

    def __init__(self, connect: Callable[[], Client], output: str) -> None:
        self._connect = connect
        self._client: Client | None = None
        self.output = output

    @property
    def client(self) -> Client:
        if self._client is None:
            self._client = self._connect()
        return self._client

    @property
    def source(self) -> str:
        """Where the token came from (``none`` before the client is made)."""
        return "none" if self._client is None else self._client.source

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    @property
    def tabular(self) -> bool:
        """Whether the output is a table (narrow or wide), for people rather than programs."""
        return self.output in (shared.TABLE, shared.WIDE)

    def emit(self, data: Any, table: Callable[[Any], str], wide: Callable[[Any], str] | None = None) -> None:
        """Print ``data`` as JSON/YAML when asked, else as ``table(data)`` (``wide(data)`` for
        ``-o wide``)."""
        emit(data, self.output, table, wide)


def render(
    data: Any, output: str, table: Callable[[Any], str], wide: Callable[[Any], str] | None = None
) -> str:
    """``data`` as JSON or YAML when ``output`` says so, else as ``table(data)`` (``wide(data)``
    for ``-o wide``, when the command has a wide table)."""
    if output == "json":
        return json.dumps(data, indent=2)
    if output == "yaml":
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip()
    if output == shared.WIDE and wide is not None:
        return wide(data)
    return table(data)


def emit(
    data: Any, output: str, table: Callable[[Any], str], wide: Callable[[Any], str] | None = None
) -> None:
    """Print :func:`render`'s text, if any (local commands, such as ``schedule preview``, print
    the same way as the API commands)."""
    text = render(data, output, table, wide)
    if text:
        click.echo(text)


def output_option(func: Callable[..., None]) -> Callable[..., None]:
    """``-o`` (:data:`cronwheel.cli.global_options.OUTPUT`) for a command that sends no request: it is
    handed the format given, before, between a group and its subcommand, or after the subcommand
    (table when none)."""

    @shared.take(shared.OUTPUT)
    @functools.wraps(func)
    def wrapper(*args: Any, output: str | None, **kwargs: Any) -> None:
        func(*args, output=shared.output(wide=False), **kwargs)

    return wrapper


class ApiFailure(click.ClickException):
    """An error of the client, as the CLI reports it: exit 2 for a request the server refused
    (4xx), 1 for a server or network failure."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc] # click reads it from the instance too


def connect(
    url: str | None, token: str | None, context: str | None, tls: dict[str, str | None], **options: Any
) -> Client:
    """The client of the server, token and TLS files :mod:`cronwheel.client.connection` resolves
    (``options``: the client's, such as its ``timeout``)."""
    env = dict(os.environ)
    try:
        config = connection.load_config(connection.config_path(env))
        found = connection.resolve(
            url=url, token=token, context=context, env=env, config=config, cwd=Path.cwd(), tls=tls
        )
    except ConfigurationError as error:
        raise click.UsageError(str(error)) from None
    try:
        connection.checked_url(found.url)
    except ConfigurationError as error:
        raise click.BadParameter(str(error), param_hint="--url") from None
    from cronwheel.client import Client  # noqa: PLC0415 - httpx only for a command that sends

    try:
        return Client.from_connection(found, **options)
    except ConfigurationError as error:
        raise click.UsageError(str(error)) from None


def connect_given(ctx: click.Context, **options: Any) -> Client:
    """The client of the connection options given to ``ctx``'s command or before it."""
    url, token, context, *tls = (shared.given(param.name or "", ctx) for param in shared.CONNECTION)
    files = dict(zip(("ca_cert", "client_cert", "client_key"), tls, strict=True))
    return connect(url, token, context, files, **options)


def failure(error: ClientError, source: str) -> click.ClickException:
    """How the CLI reports ``error`` (``source``: where the token came from, for a 401's hint)."""
    if isinstance(error, Unauthenticated):
        return ApiFailure(f"{error}\n  ({token_hint(source)})", 2)
    if isinstance(error, ConnectionFailed):
        hint = "is the server running? Point the CLI at it with --url or CRONWHEEL_URL"
        return ApiFailure(f"{error}\n  ({hint})", 1)
    if isinstance(error, ApiError):
        return ApiFailure(str(error), 2 if isinstance(error, RequestRefused) else 1)
    return click.UsageError(str(error))


def token_hint(source: str) -> str:
    if source == "none":
        return (
            "no token was sent: pass --token, set CRONWHEEL_TOKEN, or add a context "
            "(cronwheel config set-context); a local `cronwheel server` keeps its admin token "
            "in <database>.token"
        )
    return f"the token from {source} was refused"


Decorator = Callable[[Callable[..., None]], Callable[..., None]]


@overload
def api_command(func: Callable[..., None]) -> Callable[..., None]: ...


@overload
def api_command(*, wide: bool) -> Decorator: ...


def api_command(func: Callable[..., None] | None = None, *, wide: bool = False) -> Any:
    """Give a command the global options (:mod:`cronwheel.cli.global_options`) and hand it a
    :class:`Ctx` as first argument; ``wide``: it prints a wide table for ``-o wide``."""

    def decorate(func: Callable[..., None]) -> Callable[..., None]:
        @shared.take(*shared.GLOBAL)
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> None:
            for param in shared.GLOBAL:
                kwargs.pop(param.name or "")
            chosen, running = shared.output(wide=wide), click.get_current_context()
            ctx = Ctx(lambda: connect_given(running), chosen)
            try:
                func(ctx, *args, **kwargs)
            except ClientError as error:
                raise failure(error, ctx.source) from None
            finally:
                ctx.close()

        return wrapper

    return decorate if func is None else decorate(func)


# -- tables --------------------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns aligned on the widest cell; ``None`` shows as ``-``."""
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [max([len(header), *(len(row[i]) for row in cells)]) for i, header in enumerate(headers)]
    lines = ["  ".join(header.ljust(width) for header, width in zip(headers, widths, strict=True))]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


Column = tuple[str, Callable[[Any], Any]]
"""A table's column: its header and how a cell is read from an item."""


def columns_table(columns: Sequence[Column], items: Sequence[Any]) -> str:
    """A table of ``items``, a row each, a cell per column."""
    return table([header for header, _ in columns], [[cell(item) for _, cell in columns] for item in items])


def fields(pairs: Sequence[tuple[str, Any]]) -> str:
    """A vertical ``key: value`` view of one object."""
    width = max(len(key) for key, _ in pairs)
    return "\n".join(f"{key + ':':<{width + 1}} {_cell(value)}".rstrip() for key, value in pairs)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return ",".join(f"{k}={v}" for k, v in value.items()) or "-"
    if isinstance(value, list):
        return " ".join(str(item) for item in value) or "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def when(value: str | None) -> str | None:
    """An RFC 3339 instant, shorter: ``2026-03-03 02:00:00Z``."""
    return None if value is None else value.replace("T", " ")


# -- files ---------------------------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    """YAML without implicit timestamps: ``start_at: 2026-04-01T00:00:00Z`` stays text, so the
    API (not PyYAML) decides what an instant means."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def load_documents(path: str) -> list[Any]:
    """Every document of a YAML or JSON file (``-`` reads stdin)."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as error:
        raise click.BadParameter(f"cannot read {path}: {error.strerror}", param_hint="-f") from None
    try:
        if path.endswith(".json"):
            return [json.loads(text)]
        return [doc for doc in yaml.load_all(text, Loader=_Loader) if doc is not None]
    except (ValueError, yaml.YAMLError) as error:
        raise click.BadParameter(f"{path} is not valid YAML/JSON: {error}", param_hint="-f") from None


def parse_pairs(values: Sequence[str], what: str) -> dict[str, str]:
    """``key=value`` options as a dict."""
    pairs: dict[str, str] = {}
    for value in values:
        key, sep, item = value.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, not {value!r}", param_hint=what)
        pairs[key] = item
    return pairs


def parse_json(value: str, what: str) -> Any:
    try:
        return json.loads(value)
    except ValueError as error:
        raise click.BadParameter(f"not valid JSON: {error}", param_hint=what) from None


class Seconds(click.ParamType[float]):
    """A span as seconds: a number (``1.5``) or with a unit (``500ms``, ``30s``, ``2m``, ``1h``)."""

    name = "seconds"
    _UNITS: ClassVar[dict[str, float]] = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, int | float):
            return float(value)
        text = str(value).strip().lower()
        unit = next((unit for unit in ("ms", "s", "m", "h") if text.endswith(unit)), "")
        try:
            number = float(text[: len(text) - len(unit)])
        except ValueError:
            self.fail(f"{value!r} is not a span such as 30s, 1.5, 2m or 500ms", param, ctx)
        if not math.isfinite(number) or number < 0:
            self.fail(f"{value!r} is not a span of zero or more seconds", param, ctx)
        return number * self._UNITS.get(unit, 1.0)


SECONDS = Seconds()
