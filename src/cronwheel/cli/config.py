"""``cronwheel config ...``: named contexts (a server's URL and the token to use there), as
kubectl's. The file and the order in which the CLI picks its server and token are described in
:mod:`cronwheel.client.connection`."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from typing import Any

import click

from cronwheel.cli import global_options as shared
from cronwheel.cli.output import emit, output_option, table
from cronwheel.client import connection
from cronwheel.errors import InvalidInputError


@shared.group(shared.OUTPUT)
def config(**_: Any) -> None:
    """Named contexts: which server, with which token.

    \b
    Examples:
      cronwheel config set-context prod --url https://cron.example.com --token-file ~/.cron-prod.token
      cronwheel config use-context prod
      cronwheel config get-contexts
    """


def _load() -> tuple[connection.Config, str]:
    path = connection.config_path(os.environ)
    try:
        return connection.load_config(path), str(path)
    except InvalidInputError as error:
        raise click.UsageError(str(error)) from None


def _save(found: connection.Config) -> None:
    connection.save_config(connection.config_path(os.environ), found)


@config.command("set-context")
@click.argument("name")
@click.option("--url", required=True, help="The server's base URL.")
@click.option(
    "--token-file", type=click.Path(dir_okay=False), help="A file holding the token (kept as its path)."
)
@click.option(
    "--token-stdin", is_flag=True, help="Read the token from stdin (kept in the config file, 0600)."
)
@click.option("--use", is_flag=True, help="Make it the current context.")
def set_context(name: str, url: str, token_file: str | None, token_stdin: bool, use: bool) -> None:
    """Add or replace the context NAME."""
    if token_file and token_stdin:
        raise click.UsageError("give --token-file or --token-stdin, not both")
    token = (sys.stdin.read().strip() or None) if token_stdin else None
    if token_stdin and token is None:
        raise click.UsageError("--token-stdin read no token")
    found, path = _load()
    absolute = None if token_file is None else str(os.path.abspath(os.path.expanduser(token_file)))
    contexts = {**found.contexts, name: connection.Context(url.rstrip("/"), token, absolute)}
    _save(replace(found, contexts=contexts, current=name if use or found.current is None else found.current))
    click.echo(f"context {name!r} saved in {path}" + (" (current)" if use or found.current is None else ""))


@config.command("use-context")
@click.argument("name")
def use_context(name: str) -> None:
    """Make NAME the current context."""
    found, path = _load()
    if name not in found.contexts:
        raise click.UsageError(f"no context named {name!r} in {path}")
    _save(replace(found, current=name))
    click.echo(f"current context: {name}")


@config.command("delete-context")
@click.argument("name")
def delete_context(name: str) -> None:
    """Remove the context NAME."""
    found, path = _load()
    if name not in found.contexts:
        raise click.UsageError(f"no context named {name!r} in {path}")
    contexts = {key: value for key, value in found.contexts.items() if key != name}
    _save(replace(found, contexts=contexts, current=None if found.current == name else found.current))
    click.echo(f"context {name!r} deleted")


@config.command("get-contexts")
@output_option
def get_contexts(output: str) -> None:
    """List the contexts (never their tokens: where each is kept)."""
    found, _ = _load()
    data = [
        {
            "name": name,
            "current": name == found.current,
            "url": ctx.url,
            "token": ctx.token_file or ("(in the config file)" if ctx.token else None),
        }
        for name, ctx in sorted(found.contexts.items())
    ]
    emit(data, output, _table)


def _table(data: list[dict[str, object]]) -> str:
    if not data:
        return "no contexts (cronwheel config set-context NAME --url URL ...)"
    return table(
        ["CURRENT", "NAME", "URL", "TOKEN"],
        [["*" if row["current"] else "", row["name"], row["url"], row["token"]] for row in data],
    )
