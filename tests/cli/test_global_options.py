"""The global options (``--url``, ``--token``, ``--context``, the TLS files, ``-o``) go before the
command, between a group and its subcommand or after the subcommand, as kubectl's, against a real
server, for every client group; given in several places, the last one counts; each is defined once;
``-o wide`` is for the list commands and refused elsewhere before anything is sent."""

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


def groups(group: click.Group) -> Iterator[tuple[str, click.Group]]:
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        if isinstance(command, click.Group):
            yield name, command


READS: dict[str, tuple[str, ...]] = {
    "jobs": ("list",),
    "runs": ("list",),
    "tokens": ("list",),
    "secrets": ("list", "data"),
    "calendars": ("list", "data"),
    "notifications": ("get", "--team", "data"),
    "audit": ("list",),
    "cluster": ("status",),
}
"""A command of each group of API commands that only reads, with its arguments."""

POSITIONS = ("before", "between", "after")


def placed(where: str, group: str, command: tuple[str, ...], options: tuple[str, ...]) -> list[str]:
    """``cronwheel GROUP COMMAND`` with ``options`` before the group, between it and the
    subcommand, or after the subcommand."""
    return {
        "before": [*options, group, *command],
        "between": [group, *options, *command],
        "after": [group, *command, *options],
    }[where]


def test_every_group_of_api_commands_is_in_the_table() -> None:
    taking = {name for name, group in groups(cli) if any(param is GLOBAL[0] for param in group.params)}
    assert taking == set(READS)


@pytest.mark.parametrize("where", POSITIONS)
@pytest.mark.parametrize("group", sorted(READS))
def test_each_group_takes_the_options_in_every_position(server: Server, group: str, where: str) -> None:
    command = READS[group]
    result = server.bare(
        *placed(where, group, command, ("--url", server.url, "--token", server.token, "-o", "json"))
    )
    reference = server.run(group, *command, "-o", "json")
    assert (result.exit_code, result.stdout, result.stderr) == (
        reference.exit_code,
        reference.stdout,
        reference.stderr,
    )
    if group == "cluster":  # the test server is no cluster node: the request passed authentication
        assert "cluster status is not served by this process" in result.stderr
    else:
        assert result.exit_code == 0, result.stderr
        assert isinstance(json.loads(result.stdout), dict)
    refused = server.bare(*placed(where, group, command, ("--url", server.url, "--token", "cw_bad_token")))
    assert refused.exit_code == 2
    assert "(the token from --token was refused)" in refused.stderr


@pytest.mark.parametrize("where", POSITIONS)
@pytest.mark.parametrize(
    ("group", "command"),
    [
        ("schedule", ("preview", "@daily", "--after", "2026-01-01T00:00:00Z", "-n", "1")),
        ("config", ("get-contexts",)),
    ],
)
def test_a_local_group_takes_o_in_every_position(group: str, command: tuple[str, ...], where: str) -> None:
    result = CliRunner().invoke(cli, placed(where, group, command, ("-o", "json")))
    assert result.exit_code == 0, result.output
    assert result.stdout == CliRunner().invoke(cli, [group, *command, "-o", "json"]).stdout
    assert isinstance(json.loads(result.stdout), dict | list)


def test_a_local_group_refuses_the_connection_options_its_commands_do_not_take() -> None:
    result = CliRunner().invoke(cli, ["schedule", "--token", "x", "preview", "@daily"])
    assert result.exit_code == 2
    assert "No such option '--token'" in result.stderr


@pytest.mark.parametrize(
    "flag", ["--url", "--token", "--context", "--ca-cert", "--client-cert", "--client-key"]
)
@pytest.mark.parametrize("group", sorted(READS))
def test_an_option_without_its_value_between_the_group_and_its_subcommand(group: str, flag: str) -> None:
    subcommand = READS[group][0]
    at_the_end = CliRunner().invoke(cli, [group, flag], prog_name="cronwheel")
    assert at_the_end.exit_code == 2
    assert f"Error: Option '{flag}' requires an argument." in at_the_end.stderr
    swallowed = CliRunner().invoke(cli, [group, flag, *READS[group]], prog_name="cronwheel")
    assert swallowed.exit_code == 2
    message = (
        f"Error: Option '{flag}' requires an argument: '{subcommand}' is a command of 'cronwheel {group}'"
    )
    assert message in swallowed.stderr


def test_an_option_without_its_value_sends_nothing(server: Server) -> None:
    result = server.bare("jobs", "--token", *NIGHTLY[1:], "--url", server.url)
    assert result.exit_code == 2
    assert "Option '--token' requires an argument: 'create' is a command of" in result.stderr
    assert server.json("jobs", "list")["items"] == []
    before = server.bare("--token", "jobs", "list")
    assert before.exit_code == 2
    assert "Option '--token' requires an argument: 'jobs' is a command of" in before.stderr


def test_a_value_named_as_a_command_is_a_value_when_a_command_follows(server: Server) -> None:
    result = server.bare("jobs", "--url", server.url, "--context", "list", "--token", server.token, "list")
    assert result.exit_code == 2  # read as the context's name: there is no context "list"
    assert "Error: no context named 'list' in the config file" in result.stderr


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


@pytest.mark.parametrize(
    ("args", "counts"),
    [
        (("--token", "BAD", "jobs", "--token", "GOOD", "list"), True),
        (("--token", "GOOD", "jobs", "--token", "BAD", "list"), False),
        (("jobs", "--token", "BAD", "list", "--token", "GOOD"), True),
        (("jobs", "--token", "GOOD", "list", "--token", "BAD"), False),
        (("jobs", "--token", "BAD", "--token", "GOOD", "list"), True),
        (("--token", "BAD", "jobs", "--token", "BAD", "list", "--token", "GOOD"), True),
    ],
)
def test_the_last_one_counts(server: Server, args: tuple[str, ...], counts: bool) -> None:
    tokens = {"GOOD": server.token, "BAD": "cw_bad_token"}
    result = server.bare(*(tokens.get(arg, arg) for arg in args), "--url", server.url)
    assert result.exit_code == (0 if counts else 2), result.stderr
    if not counts:
        assert "(the token from --token was refused)" in result.stderr


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


def test_each_group_takes_the_global_options_its_commands_take() -> None:
    for name, group in groups(cli):
        taken = {
            param.name
            for _, command in commands(group)
            for param in command.params
            if any(param is shared for shared in GLOBAL)
        }
        own = [param for param in group.params if any(param is shared for shared in GLOBAL)]
        assert {param.name for param in own} == taken, name
        assert len(own) == len(taken), name
    assert [param for param in dict(groups(cli))["db"].params if param.name != "help"] == []


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
    for args in ([], ["jobs"], ["jobs", "list"]):
        shown = CliRunner().invoke(cli, [*args, "--help"], terminal_width=400).stdout
        (line,) = [line for line in shown.splitlines() if line.strip().startswith(flag + " ")]
        assert f"[env: {variable}]" in line
