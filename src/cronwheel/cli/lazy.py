"""A click group whose commands are imported when one is used (click's lazy-loading pattern): a
command line loads the modules of the command it runs, not those of every command. A group's
``--help`` and the shell completion of its command names load each command, for its summary."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

import click

Loader = str | Callable[[], click.Command]


class LazyGroup(click.Group):
    """A group of the commands in ``lazy``, loaded on first use: name -> ``"module:attribute"``, or a
    function that imports the command and returns it."""

    def __init__(self, *args: Any, lazy: Mapping[str, Loader], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            self.add_command(load(self.lazy[cmd_name]), cmd_name)
        return super().get_command(ctx, cmd_name)


def load(loader: Loader) -> click.Command:
    """The command ``loader`` names (``"module:attribute"``) or returns."""
    if callable(loader):
        return loader()
    module, _, attribute = loader.partition(":")
    command = getattr(importlib.import_module(module), attribute)
    if not isinstance(command, click.Command):
        raise TypeError(f"{loader} is not a click command")
    return command
