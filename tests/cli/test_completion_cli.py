"""Shell completion: ``cronwheel completion bash|zsh|fish`` prints the shell's script, and a JOB
is completed with the names of the server's jobs (found as any command finds its server: the
options typed so far, else the config file's context); a server that cannot answer completes
nothing, silently and within a second or so."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cronwheel.cli import cli

from .conftest import Server


def names(server: Server, *names: str) -> None:
    for team_name in names:
        team, name = team_name.split("/")
        done = server.run("jobs", "create", "--team", team, "--name", name, "--schedule", "@daily",
                          "--http", "https://hooks.example.com/" + name)  # fmt: skip
        assert done.exit_code == 0, done.stderr


def complete(server: Server, line: str, shell: str = "bash") -> Result:
    """What ``cronwheel`` answers the shell's completion of ``line`` (the last word is completed)."""
    words = line.split(" ")
    env = {"_CRONWHEEL_COMPLETE": f"{shell}_complete", "COMP_WORDS": line, "COMP_CWORD": str(len(words) - 1)}
    return CliRunner().invoke(cli, words[1:], prog_name="cronwheel", env={**server.environment(), **env})


@pytest.mark.parametrize(
    ("shell", "marks"),
    [
        (
            "bash",
            ["_CRONWHEEL_COMPLETE=bash_complete", "complete -o nosort -F _cronwheel_completion cronwheel"],
        ),
        ("zsh", ["#compdef cronwheel", "_CRONWHEEL_COMPLETE=zsh_complete"]),
        ("fish", ["_CRONWHEEL_COMPLETE=fish_complete", "complete --no-files --command cronwheel"]),
    ],
)
def test_each_shell_gets_its_script(shell: str, marks: list[str]) -> None:
    result = CliRunner().invoke(cli, ["completion", shell])
    assert result.exit_code == 0, result.output
    for mark in marks:
        assert mark in result.stdout


def test_an_unknown_shell_is_a_usage_error() -> None:
    result = CliRunner().invoke(cli, ["completion", "tcsh"])
    assert result.exit_code == 2
    assert "'tcsh' is not one of 'bash', 'zsh', 'fish'" in result.stderr


def test_job_arguments_complete_with_the_servers_job_names(server: Server) -> None:
    names(server, "data/nightly", "data/hourly", "web/sitemap")
    auth = f"--url {server.url} --token {server.token}"
    every = complete(server, f"cronwheel {auth} jobs describe ")
    assert every.exit_code == 0, every.output
    assert every.stdout.splitlines() == ["plain,data/hourly", "plain,data/nightly", "plain,web/sitemap"]
    assert complete(server, f"cronwheel jobs get {auth} data/n").stdout == "plain,data/nightly\n"
    assert complete(server, f"cronwheel runs list {auth} --job w").stdout == "plain,web/sitemap\n"
    zsh = complete(server, f"cronwheel {auth} jobs pause d", shell="zsh").stdout.splitlines()
    assert [line for line in zsh if "/" in line] == ["data/hourly", "data/nightly"]


def test_options_between_the_group_and_its_subcommand_are_read_for_completion(server: Server) -> None:
    names(server, "data/nightly", "web/sitemap")
    auth = f"--url {server.url} --token {server.token}"
    assert complete(server, f"cronwheel jobs {auth} desc").stdout == "plain,describe\n"
    assert complete(server, f"cronwheel jobs {auth} describe w").stdout == "plain,web/sitemap\n"
    assert complete(server, f"cronwheel runs {auth} list --job d").stdout == "plain,data/nightly\n"
    assert "plain,--token" in complete(server, "cronwheel jobs --to").stdout.splitlines()


def test_completion_reads_the_configured_context(server: Server) -> None:
    names(server, "data/nightly")
    made = server.bare(
        "config", "set-context", "test", "--url", server.url, "--token-stdin", input=server.token
    )
    assert made.exit_code == 0, made.stderr
    assert complete(server, "cronwheel jobs trigger ").stdout == "plain,data/nightly\n"


def test_an_unreachable_or_refusing_server_completes_nothing(server: Server) -> None:
    names(server, "data/nightly")
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        nobody = f"http://127.0.0.1:{closed.getsockname()[1]}"  # bound, not listening: refused
    refused = complete(server, f"cronwheel jobs describe --url {nobody} --token x d")
    wrong_token = complete(server, f"cronwheel jobs describe --url {server.url} --token cw_bad d")
    for result in (refused, wrong_token):
        assert (result.exit_code, result.output.strip()) == (0, "")


def test_a_server_that_does_not_answer_completes_nothing_within_the_timeout(server: Server) -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()  # connections wait in the backlog, never answered
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        started = time.monotonic()
        result = complete(server, f"cronwheel jobs describe --url {url} --token x d")
        took = time.monotonic() - started
    assert (result.exit_code, result.output.strip()) == (0, "")
    assert took < 5  # the client's timeout is 1 s


def test_the_installed_program_completes_for_bash(server: Server) -> None:
    names(server, "data/nightly")
    program = Path(sys.executable).with_name("cronwheel")
    env = {**os.environ, **{k: v for k, v in server.environment().items() if v is not None}}
    env.update(
        _CRONWHEEL_COMPLETE="bash_complete",
        COMP_WORDS=f"cronwheel jobs describe --url {server.url} --token {server.token} data/",
        COMP_CWORD="7",
    )
    done = subprocess.run([str(program)], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout) == (0, "plain,data/nightly\n"), done.stderr
