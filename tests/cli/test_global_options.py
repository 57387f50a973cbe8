"""The global options (``--url``, ``--token``, ``--context``, the TLS files, ``-o``) go before or
after the subcommand, as kubectl's, against a real server; each is defined once; ``-o wide`` is
for the list commands and refused elsewhere before anything is sent."""

from __future__ import annotations

import json
from collections.abc import Iterator

import click
import pytest
from click.testing import CliRunner

from cronwheel.cli import cli
from cronwheel.cli.global_options import GLOBAL

from .conftest import Server

HOOK = "https://hooks.example.com/nightly"
NIGHTLY = ("jobs", "create", "--team", "data", "--name", "nightly", "--schedule", "0 3 * * *", "--http", HOOK)


def commands(
    group: click.Group, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name), command


def test_the_options_go_before_or_after_the_subcommand(server: Server) -> None:
    assert server.run(*NIGHTLY).exit_code == 0
    before = server.bare("--url", server.url, "--token", server.token, "jobs", "list")
    after = server.bare("jobs", "list", "--url", server.url, "--token", server.token)
    mixed = server.bare("--token", server.token, "jobs", "list", "--url", server.url)
    for result in (before, after, mixed):
        assert result.exit_code == 0, result.stderr
        assert " nightly " in result.stdout
    assert before.stdout == after.stdout == mixed.stdout
    as_json = server.bare(
        "-o", "json", "--url", server.url, "--token", server.token, "jobs", "get", "data/nightly"
    )
    assert as_json.exit_code == 0, as_json.stderr
    assert json.loads(as_json.stdout)["name"] == "nightly"


def test_the_one_after_the_subcommand_counts(server: Server) -> None:
    good = server.bare(
        "--token", "cw_bad_token", "jobs", "list", "--token", server.token, "--url", server.url
    )
    assert good.exit_code == 0, good.stderr
    refused = server.bare(
        "--token", server.token, "jobs", "list", "--token", "cw_bad_token", "--url", server.url
    )
    assert refused.exit_code == 2
    assert "(the token from --token was refused)" in refused.stderr


def test_a_token_given_before_the_subcommand_beats_the_variable(server: Server) -> None:
    env = {"CRONWHEEL_TOKEN": "cw_bad_token", "CRONWHEEL_URL": server.url}
    assert server.bare("--token", server.token, "jobs", "list", env=env).exit_code == 0
    refused = server.bare("jobs", "list", env=env)
    assert refused.exit_code == 2
    assert "(the token from CRONWHEEL_TOKEN was refused)" in refused.stderr


def test_a_context_before_the_subcommand(server: Server) -> None:
    made = server.bare(
        "config", "set-context", "test", "--url", server.url, "--token-stdin", input=server.token
    )
    assert made.exit_code == 0, made.stderr
    assert (
        server.bare("config", "set-context", "elsewhere", "--url", "http://127.0.0.1:9", "--use").exit_code
        == 0
    )
    result = server.bare("--context", "test", "jobs", "list")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "no jobs\n"


def test_a_local_command_takes_o_before_the_subcommand() -> None:
    args = ["schedule", "preview", "@daily", "--after", "2026-01-01T00:00:00Z", "-n", "1"]
    before = CliRunner().invoke(cli, ["-o", "json", *args])
    assert before.exit_code == 0, before.output
    assert json.loads(before.stdout)["fires"][0]["utc"] == "2026-01-02T00:00:00Z"
    assert before.stdout == CliRunner().invoke(cli, [*args, "-o", "json"]).stdout


def test_each_global_option_is_one_definition_shared_by_every_api_command() -> None:
    for param in GLOBAL:
        assert any(own is param for own in cli.params), param.name
    taking = [path for path, command in commands(cli) if any(own is GLOBAL[0] for own in command.params)]
    assert ("jobs", "list") in taking
    assert ("runs", "get") in taking
    assert len(taking) > 30  # every API command
    for path, command in commands(cli):
        flags = [opt for param in command.params for opt in param.opts]
        assert len(flags) == len(set(flags)), path  # no copies beside the shared ones
        if path in taking:
            assert all(any(own is param for own in command.params) for param in GLOBAL), path


def test_wide_is_refused_where_there_is_no_wide_table_before_anything_is_sent(server: Server) -> None:
    result = server.run(*NIGHTLY, "-o", "wide")
    assert result.exit_code == 2
    assert "-o wide is for list commands" in result.stderr
    assert server.json("jobs", "list")["items"] == []
    assert server.bare("-o", "wide", "config", "get-contexts").exit_code == 2
    bad = server.run("jobs", "list", "-o", "wider")
    assert bad.exit_code == 2
    assert "'wider' is not one of 'table', 'wide', 'json', 'yaml'" in bad.stderr


@pytest.mark.parametrize(
    "flag", ["--url", "--token", "--context", "--ca-cert", "--client-cert", "--client-key"]
)
def test_the_help_names_each_connection_variable(flag: str) -> None:
    variable = "CRONWHEEL_" + flag.removeprefix("--").replace("-", "_").upper()
    for args in ([], ["jobs", "list"]):
        shown = CliRunner().invoke(cli, [*args, "--help"], terminal_width=400).stdout
        (line,) = [line for line in shown.splitlines() if line.strip().startswith(flag + " ")]
        assert f"[env: {variable}]" in line
