"""The ``cronwheel`` command line. Its commands are imported when one runs (:class:`LazyGroup`), so
that a client command loads neither the server nor another command's modules."""

from __future__ import annotations

from typing import Any

import click

from cronwheel import __version__
from cronwheel.cli.global_options import GLOBAL, ClientGroup, take
from cronwheel.cli.lazy import LazyGroup, Loader


def _jobs() -> click.Command:
    """``cronwheel jobs`` with the commands of other modules that act on one job."""
    from cronwheel.cli.backfilling import backfill, backfills, cancel_backfill  # noqa: PLC0415
    from cronwheel.cli.describe import describe  # noqa: PLC0415
    from cronwheel.cli.jobs import jobs  # noqa: PLC0415

    for command in (describe, backfill, backfills, cancel_backfill):
        jobs.add_command(command)
    return jobs


COMMANDS: dict[str, Loader] = {
    "server": "cronwheel.cli.server:server",
    "api": "cronwheel.cli.server:api",
    "scheduler": "cronwheel.cli.server:scheduler",
    "worker": "cronwheel.cli.server:worker",
    "db": "cronwheel.cli.server:db",
    "cluster": "cronwheel.cli.cluster:cluster",
    "schedule": "cronwheel.cli.schedule:schedule",
    "jobs": _jobs,
    "runs": "cronwheel.cli.runs:runs",
    "apply": "cronwheel.cli.apply:apply",
    "export": "cronwheel.cli.export:export",
    "import": "cronwheel.cli.importing:import_",
    "tokens": "cronwheel.cli.tokens:tokens",
    "config": "cronwheel.cli.config:config",
    "secrets": "cronwheel.cli.secrets:secrets",
    "calendars": "cronwheel.cli.calendars:calendars",
    "audit": "cronwheel.cli.audit:audit",
    "notifications": "cronwheel.cli.notifications:notifications",
    "completion": "cronwheel.cli.completion:completion",
}
"""Every command of ``cronwheel``: its name and where it is defined."""


class Cli(ClientGroup, LazyGroup):
    """``cronwheel``: its commands load lazily; its global options are read as every client group's."""


@click.group(cls=Cli, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cronwheel")
@take(*GLOBAL)
def cli(**_: Any) -> None:
    """cronwheel: a cron service that fires on time and never doubles or drops a run.

    The options below go before the command, between a group and its subcommand, or after the
    subcommand (cronwheel --context prod jobs list, cronwheel jobs --context prod list, cronwheel
    jobs list --context prod); given in several places, the last one counts.
    """


def main() -> None:
    """Console-script entry point."""
    cli()
