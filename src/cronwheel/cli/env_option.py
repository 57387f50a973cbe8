"""An option whose help names the environment variable it is read from, as ``[env: NAME]``."""

from __future__ import annotations

from typing import Any

import click


class EnvOption(click.Option):
    """A ``click.Option`` that shows its ``envvar`` in its help as ``[env: NAME]``.

    ``read_env=False``: the variable is shown but left for the command to read, for options
    whose variable ranks below something else, such as ``--url`` below a config context; read
    here, it would be a given value."""

    def __init__(self, *args: Any, read_env: bool = True, **attrs: Any) -> None:
        attrs.setdefault("show_envvar", True)
        super().__init__(*args, **attrs)
        self.read_env = read_env

    def resolve_envvar_value(self, ctx: click.Context) -> str | None:
        return super().resolve_envvar_value(ctx) if self.read_env else None

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        record = super().get_help_record(ctx)
        if record is None:
            return None
        spec, text = record
        return spec, text.replace("[env var: ", "[env: ")
