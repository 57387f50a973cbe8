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
from typing import TYPE_CHECKING, Any, ClassVar

import click
import yaml

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

FORMATS = ("table", "json", "yaml")


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

    def emit(self, data: Any, table: Callable[[Any], str]) -> None:
        """Print ``data`` as JSON/YAML when asked, else as ``table(data)``."""
        emit(data, self.output, table)


def emit(data: Any, output: str, table: Callable[[Any], str]) -> None:
    """Print ``data`` as JSON or YAML when ``output`` says so, else as ``table(data)`` (local
    commands, such as ``schedule preview``, print the same way as the API commands)."""
    if output == "json":
        click.echo(json.dumps(data, indent=2))
    elif output == "yaml":
        click.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True).rstrip())
    else:
        text = table(data)
        if text:
            click.echo(text)


def output_option(func: Callable[..., None]) -> Callable[..., None]:
    """``-o table|json|yaml``, as every command takes it."""
    option = click.option("-o", "--output", type=click.Choice(FORMATS), default="table", show_default=True)
    return option(func)


class ApiFailure(click.ClickException):
    """An error of the client, as the CLI reports it: exit 2 for a request the server refused
    (4xx), 1 for a server or network failure."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc] # click reads it from the instance too


def connect(url: str | None, token: str | None, context: str | None, tls: dict[str, str | None]) -> Client:
    """The client of the server, token and TLS files :mod:`cronwheel.client.connection` resolves."""
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
        return Client.from_connection(found)
    except ConfigurationError as error:
        raise click.UsageError(str(error)) from None


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


def api_command(func: Callable[..., None]) -> Callable[..., None]:
    """Add ``--url``, ``--token``, ``--context`` and ``-o`` to a command and hand it a
    :class:`Ctx` as first argument."""

    @click.option(
        "--url",
        default=None,
        help="Base URL of the cronwheel API (env: CRONWHEEL_URL; default: the context's, else "
        f"{connection.DEFAULT_URL}).",
    )
    @click.option(
        "--token",
        default=None,
        help="API token (env: CRONWHEEL_TOKEN; default: the context's, else a local server's token file).",
    )
    @click.option("--context", default=None, help="A context of the config file (env: CRONWHEEL_CONTEXT).")
    @click.option(
        "--ca-cert",
        default=None,
        metavar="PEM",
        help="CA certificate(s) to verify an https server with (env: CRONWHEEL_CA_CERT; default: the "
        "context's, else the usual CAs).",
    )
    @click.option(
        "--client-cert", default=None, metavar="PEM", help="Client certificate (env: CRONWHEEL_CLIENT_CERT)."
    )
    @click.option(
        "--client-key", default=None, metavar="PEM", help="Its private key (env: CRONWHEEL_CLIENT_KEY)."
    )
    @output_option
    @functools.wraps(func)
    def wrapper(
        *args: Any,
        url: str | None,
        token: str | None,
        context: str | None,
        ca_cert: str | None,
        client_cert: str | None,
        client_key: str | None,
        output: str,
        **kwargs: Any,
    ) -> None:
        tls = {"ca_cert": ca_cert, "client_cert": client_cert, "client_key": client_key}
        ctx = Ctx(lambda: connect(url, token, context, tls), output)
        try:
            func(ctx, *args, **kwargs)
        except ClientError as error:
            raise failure(error, ctx.source) from None
        finally:
            ctx.close()

    return wrapper


# -- tables --------------------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Columns aligned on the widest cell; ``None`` shows as ``-``."""
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [max([len(header), *(len(row[i]) for row in cells)]) for i, header in enumerate(headers)]
    lines = ["  ".join(header.ljust(width) for header, width in zip(headers, widths, strict=True))]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(line.rstrip() for line in lines)


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
