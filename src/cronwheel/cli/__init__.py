"""The ``cronwheel`` command line."""

from __future__ import annotations

import click

from cronwheel import __version__
from cronwheel.cli.schedule import schedule


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cronwheel")
def cli() -> None:
    """cronwheel: a cron service that fires on time and never doubles or drops a run."""


cli.add_command(schedule)


def main() -> None:
    """Console-script entry point."""
    cli()
