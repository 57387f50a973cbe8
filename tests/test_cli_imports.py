"""A client command starts without the server: run in a process of its own, ``cronwheel --help``,
``jobs list`` and the completion of a JOB import neither the API, the store, the node nor another
command's heavy modules (the command groups load a command's module when it is used), while
every command is still listed and its help renders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cronwheel.cli import COMMANDS, cli

RUN = """
import json, sys
from cronwheel.cli import cli
try:
    cli.main(sys.argv[1:], prog_name="cronwheel")
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""
"""Runs the command line given as arguments, then prints every module the process imported."""

SERVER_ONLY = (
    "fastapi",
    "pydantic",
    "sqlalchemy",
    "uvicorn",
    "grpc",
    "holidays",
    "cronwheel.api",
    "cronwheel.node",
    "cronwheel.store",
    "cronwheel.scheduler",
    "cronwheel.worker",
)
"""What no client command loads."""

OTHER_COMMANDS = (
    "cronwheel.importers",
    "cronwheel.cli.importing",
    "cronwheel.cli.apply",
    "cronwheel.cli.export",
    "cronwheel.cli.secrets",
    "cronwheel.cli.tokens",
    "cronwheel.cli.server",
)
"""Modules of other commands, which ``jobs list`` does not load."""


def imported(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> set[str]:
    """The modules a ``cronwheel`` process given ``args`` imported, against a closed port and a
    config file of its own."""
    environment = {
        "PATH": "/usr/bin:/bin",
        "CRONWHEEL_CONFIG": str(tmp_path / "config.yaml"),
        "CRONWHEEL_URL": "http://127.0.0.1:1",  # nothing listens: a client command fails fast
        **(env or {}),
    }
    result = subprocess.run(
        [sys.executable, "-c", RUN, *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=True,
    )
    return set(json.loads(result.stdout.splitlines()[-1]))


def loaded(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    """The ``packages`` of which ``modules`` holds the package or one of its modules."""
    return [each for each in packages if any(m == each or m.startswith(f"{each}.") for m in modules)]


@pytest.mark.parametrize("args", [["--help"], ["jobs", "list", "--help"], ["runs", "get", "--help"]])
def test_help_loads_no_server_module(tmp_path: Path, args: list[str]) -> None:
    assert loaded(imported(tmp_path, *args), SERVER_ONLY) == []


def test_a_client_command_loads_only_its_own_modules(tmp_path: Path) -> None:
    modules = imported(tmp_path, "jobs", "list")
    assert "cronwheel.client.http" in modules  # it did reach the point of sending
    assert loaded(modules, SERVER_ONLY + OTHER_COMMANDS) == []


def test_completing_a_job_loads_no_server_module(tmp_path: Path) -> None:
    modules = imported(
        tmp_path,
        env={"_CRONWHEEL_COMPLETE": "bash_complete", "COMP_WORDS": "cronwheel jobs get ", "COMP_CWORD": "3"},
    )
    assert "cronwheel.cli.completion" in modules
    assert loaded(modules, SERVER_ONLY + OTHER_COMMANDS) == []


def test_every_command_is_listed_and_its_help_renders() -> None:
    shown = CliRunner().invoke(cli, ["--help"], terminal_width=200)
    assert shown.exit_code == 0, shown.output
    listed = {line.split()[0] for line in shown.output.split("Commands:")[1].splitlines() if line.strip()}
    assert listed == COMMANDS.keys()
    for name in COMMANDS:
        command = cli.get_command(click.Context(cli), name)
        assert command is not None, name
        assert command.name == name
        names = [[name]]
        if isinstance(command, click.Group):
            names += [[name, sub] for sub in command.list_commands(click.Context(command))]
        for path in names:
            result = CliRunner().invoke(cli, [*path, "--help"], terminal_width=200)
            assert result.exit_code == 0, (path, result.output)
            assert f"Usage: cli {' '.join(path)}" in result.output, path


def test_jobs_holds_the_commands_of_one_job() -> None:
    jobs = cli.get_command(click.Context(cli), "jobs")
    assert isinstance(jobs, click.Group)
    assert {"describe", "backfill", "backfills", "cancel-backfill", "list"} <= set(
        jobs.list_commands(click.Context(jobs))
    )
