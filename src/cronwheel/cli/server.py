"""``cronwheel server``: the whole service in one process (embedded backends, zero configuration)."""

from __future__ import annotations

import asyncio
import sys

import click

from cronwheel.errors import CronwheelError


@click.command()
@click.option(
    "--host", default="127.0.0.1", show_default=True, envvar="CRONWHEEL_HOST", help="Address to listen on."
)
@click.option(
    "--port", default=8080, show_default=True, envvar="CRONWHEEL_PORT", type=click.IntRange(0, 65535)
)
@click.option(
    "--database-url",
    default="sqlite:///cronwheel.db",
    show_default=True,
    envvar="CRONWHEEL_DATABASE_URL",
    help="Where jobs and runs are kept (a SQLite file in the working directory by default).",
)
@click.option(
    "--allow-commands", is_flag=True, envvar="CRONWHEEL_ALLOW_COMMANDS", help="Allow command targets."
)
@click.option(
    "--allow-python",
    multiple=True,
    metavar="PATTERN",
    help="Allow python targets matching this 'module:function' pattern (repeatable, fnmatch).",
)
@click.option(
    "--allow-network",
    multiple=True,
    metavar="CIDR",
    help="Let HTTP targets reach this non-public network, e.g. 127.0.0.0/8 (repeatable).",
)
@click.option(
    "--concurrency", default=64, show_default=True, type=click.IntRange(1, 100_000), help="Attempts at once."
)
@click.option(
    "--queue",
    "queues",
    multiple=True,
    default=("default",),
    show_default=True,
    metavar="NAME",
    help="Worker queue this process serves (repeatable); jobs naming another queue are refused.",
)
@click.option("--log-level", default="INFO", show_default=True, envvar="CRONWHEEL_LOG_LEVEL")
def server(
    host: str,
    port: int,
    database_url: str,
    allow_commands: bool,
    allow_python: tuple[str, ...],
    allow_network: tuple[str, ...],
    concurrency: int,
    queues: tuple[str, ...],
    log_level: str,
) -> None:
    """Start cronwheel: API, scheduler and workers in one process."""
    from cronwheel import logs  # noqa: PLC0415 - imported late: other commands stay quick to start
    from cronwheel.server import ServerSettings, serve  # noqa: PLC0415

    logs.configure(log_level)
    settings = ServerSettings(
        host=host,
        port=port,
        database_url=database_url,
        allow_commands=allow_commands,
        python_allow=allow_python,
        allowed_networks=allow_network,
        concurrency=concurrency,
        queues=queues,
    )
    try:
        asyncio.run(serve(settings, announce=lambda text: click.echo(text, err=True)))
    except CronwheelError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(2)
