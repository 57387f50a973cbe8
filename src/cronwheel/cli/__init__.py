"""The ``cronwheel`` command line."""

from __future__ import annotations

from typing import Any

import click

from cronwheel import __version__
from cronwheel.cli.apply import apply
from cronwheel.cli.audit import audit
from cronwheel.cli.backfilling import backfill, backfills, cancel_backfill
from cronwheel.cli.calendars import calendars
from cronwheel.cli.cluster import cluster
from cronwheel.cli.completion import completion
from cronwheel.cli.config import config
from cronwheel.cli.describe import describe
from cronwheel.cli.export import export
from cronwheel.cli.global_options import GLOBAL, take
from cronwheel.cli.importing import import_
from cronwheel.cli.jobs import jobs
from cronwheel.cli.notifications import notifications
from cronwheel.cli.runs import runs
from cronwheel.cli.schedule import schedule
from cronwheel.cli.secrets import secrets
from cronwheel.cli.server import api, db, scheduler, server, worker
from cronwheel.cli.tokens import tokens


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cronwheel")
@take(*GLOBAL)
def cli(**_: Any) -> None:
    """cronwheel: a cron service that fires on time and never doubles or drops a run.

    The options below go before or after the subcommand (cronwheel --context prod jobs list,
    cronwheel jobs list --context prod).
    """


cli.add_command(server)
cli.add_command(api)
cli.add_command(scheduler)
cli.add_command(worker)
cli.add_command(db)
cli.add_command(cluster)
cli.add_command(schedule)
cli.add_command(jobs)
jobs.add_command(describe)
jobs.add_command(backfill)
jobs.add_command(backfills)
jobs.add_command(cancel_backfill)
cli.add_command(runs)
cli.add_command(apply)
cli.add_command(export)
cli.add_command(import_)
cli.add_command(tokens)
cli.add_command(config)
cli.add_command(secrets)
cli.add_command(calendars)
cli.add_command(audit)
cli.add_command(notifications)
cli.add_command(completion)


def main() -> None:
    """Console-script entry point."""
    cli()
