"""The options of every API command, each defined once: ``--url``, ``--token``, ``--context``,
the TLS files and ``-o``. ``cronwheel`` and each group of client commands (:func:`group`) take
them too, so that, as kubectl's, they go before the command, between a group and its subcommand,
or after the subcommand; given in several places, the last one counts.

A command reads them with :func:`given` (the nearest command's value, else its parents'), never
from its own parameters, since a value given before the subcommand is its parent's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from cronwheel.cli.env_option import EnvOption
from cronwheel.client import connection

TABLE, WIDE = "table", "wide"
FORMATS = (TABLE, WIDE, "json", "yaml")
"""``-o``: a table, a table with more columns (list commands), or the API's data as JSON or YAML."""


def _connection(flag: str, help: str, metavar: str | None = None) -> EnvOption:
    """A connection option, with the variable :mod:`cronwheel.client.connection` reads for it
    (there, not here: it ranks below the option and above a config context)."""
    name = flag.removeprefix("--").replace("-", "_")
    return EnvOption([flag], envvar=connection.VARIABLES[name], read_env=False, metavar=metavar, help=help)


URL = _connection(
    "--url", f"Base URL of the cronwheel API (default: the context's, else {connection.DEFAULT_URL})."
)
TOKEN = _connection("--token", "API token (default: the context's, else a local server's token file).")
CONTEXT = _connection("--context", "A context of the config file (default: the current context).")
CA_CERT = _connection(
    "--ca-cert",
    "CA certificate(s) to verify an https server with (default: the context's, else the usual CAs).",
    "PEM",
)
CLIENT_CERT = _connection("--client-cert", "Client certificate (default: the context's).", "PEM")
CLIENT_KEY = _connection("--client-key", "Its private key (default: the context's).", "PEM")
OUTPUT = click.Option(
    ["-o", "--output"],
    type=click.Choice(FORMATS),
    help="How to print: table (default), wide (list commands: more columns), json or yaml.",
)

CONNECTION = (URL, TOKEN, CONTEXT, CA_CERT, CLIENT_CERT, CLIENT_KEY)
"""Where the API is and how to reach it (resolved by :mod:`cronwheel.client.connection`)."""
GLOBAL = (*CONNECTION, OUTPUT)


def given(name: str, ctx: click.Context | None = None) -> Any:
    """The value of the global option ``name`` (a parameter name): the nearest command's that
    was given, walking from the running command up to ``cronwheel``; None when none was."""
    current: click.Context | None = ctx or click.get_current_context()
    while current is not None:
        value = current.params.get(name)
        if value is not None:
            return value
        current = current.parent
    return None


def output(*, wide: bool) -> str:
    """The ``-o`` format given (table when none); ``wide`` says whether the command has a wide
    table. Asked of one that has not: a usage error, before anything is sent."""
    chosen: str = given("output") or TABLE
    if chosen == WIDE and not wide:
        raise click.UsageError("-o wide is for list commands (jobs list, runs list); use table, json or yaml")
    return chosen


def take(*params: click.Parameter) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add these (shared) parameters to a command's, as a ``click.option`` decorator adds its own."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        held: list[click.Parameter] = func.__dict__.setdefault("__click_params__", [])
        held.extend(reversed(params))  # click reverses the decorators' list
        return func

    return decorate


class ClientGroup(click.Group):
    """A group whose global options (:func:`take`) also go between it and its subcommand. One given
    without its value takes the subcommand's name as its value (``cronwheel jobs --token list``):
    that is reported as the missing value, not as a missing command or an unknown option."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not ctx.resilient_parsing:  # completion parses a line still being typed
            taken = self._command_taken_as_value(ctx, args)
            if taken is not None:
                flag, value = taken
                raise click.UsageError(
                    f"Option '{flag}' requires an argument: {value!r} is a command of {ctx.command_path!r}",
                    ctx,
                )
        return super().parse_args(ctx, args)

    def _command_taken_as_value(self, ctx: click.Context, args: list[str]) -> tuple[str, str] | None:
        """The first global option of ``args`` whose value is the name of one of this group's
        commands, with that name, when no command follows; None when one does (a context may
        be named ``list``), or when help is asked for."""
        commands = set(self.list_commands(ctx))
        flags = {
            opt for param in self.params if any(param is shared for shared in GLOBAL) for opt in param.opts
        }
        taken: tuple[str, str] | None = None
        words = iter(args)
        for word in words:
            if word in ctx.help_option_names:
                return None
            if word in flags:
                value = next(words, "")
                taken = taken or ((word, value) if value in commands else None)
            elif not word.startswith("-") or word == "--":
                return None if word in commands else taken
        return taken


def group(*params: click.Parameter) -> Callable[[Callable[..., None]], ClientGroup]:
    """``click.group`` for a group of client commands, taking ``params``: the global options its
    commands take, so that they go between the group and its subcommand too. Its function takes
    them as keyword arguments and leaves them to its commands."""

    def decorate(func: Callable[..., None]) -> ClientGroup:
        return click.group(cls=ClientGroup)(take(*params)(func))

    return decorate
