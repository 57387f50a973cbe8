"""``cronwheel server`` (every role in one process) and ``cronwheel api|scheduler|worker`` (one
role each, for a cluster), plus ``cronwheel db upgrade``. Their options are the settings fields'
(:mod:`cronwheel.cli.options`), each command taking those of its roles."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import TYPE_CHECKING, Any

import click

from cronwheel.cli.options import NodeCommand, database_url_option, settings_from
from cronwheel.errors import CronwheelError
from cronwheel.settings import API, ROLES, SCHEDULER, WORKER

if TYPE_CHECKING:
    from cronwheel.node.server import ServerSettings


def node_settings(roles: tuple[str, ...], options: dict[str, Any]) -> ServerSettings:
    """The settings a node command runs ``roles`` with: its ``options``, and the settings only the
    environment gives."""
    from cronwheel.secrets.keys import ENV_KEYS  # noqa: PLC0415

    return settings_from(
        options,
        roles=roles,
        secret_keys=os.environ.get(ENV_KEYS) or None,  # never an option: options land in `ps`
        smtp_url=os.environ.get("CRONWHEEL_SMTP_URL") or None,  # nor this: it may hold a password
    )


def _run(roles: tuple[str, ...], options: dict[str, Any]) -> None:
    from cronwheel.node.server import serve, tune_collector  # noqa: PLC0415
    from cronwheel.telemetry import logs  # noqa: PLC0415 - imported late: other commands stay quick to start

    try:
        settings = node_settings(roles, options)
        logs.configure(settings.log_level, settings.log_format)
        tune_collector()
        asyncio.run(serve(settings, announce=lambda text: click.echo(text, err=True)))
    except CronwheelError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(2)


def _node_command(name: str, roles: tuple[str, ...], help: str) -> NodeCommand:
    def run(**options: Any) -> None:
        _run(roles, options)

    return NodeCommand(name, roles, run, help)


server = _node_command(
    "server",
    ROLES,
    "Start cronwheel: API, scheduler and workers in one process (embedded backends by default).",
)
api = _node_command("api", (API,), "Run the REST API role (cluster mode).")
scheduler = _node_command(
    "scheduler", (SCHEDULER,), "Run the scheduler role: fire the shards this node leases (cluster mode)."
)
worker = _node_command(
    "worker", (WORKER,), "Run the worker role: attempt runs from the queue (cluster mode)."
)


@click.group()
def db() -> None:
    """Database maintenance."""


@db.command()
@database_url_option("The store to migrate.")
def upgrade(database_url: str) -> None:
    """Apply the schema migrations (idempotent)."""
    from cronwheel.node.backends import schema_errors  # noqa: PLC0415
    from cronwheel.redaction import redact_url  # noqa: PLC0415
    from cronwheel.store.migrate import upgrade_database  # noqa: PLC0415

    try:
        with schema_errors():
            asyncio.run(upgrade_database(database_url))
    except CronwheelError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(2)
    click.echo(f"database at {redact_url(database_url)} is at the newest schema")
