"""The node commands' options are derived from the settings fields: ``cronwheel server`` takes
every option it always took (same flags, variables, defaults and ranges), each role command only
those of its role (click refuses the others), and what is given reaches the settings."""

from __future__ import annotations

import os
import re
from typing import Any

import click
import pytest
from click.testing import CliRunner

from cronwheel.cli.server import api, db, scheduler, server, worker
from cronwheel.settings import DEFAULT_DATABASE_URL

# flag: (variable, value when nothing is given, range or choices)
SERVER: dict[str, tuple[str | None, Any, Any]] = {
    "--host": ("CRONWHEEL_HOST", "127.0.0.1", None),
    "--port": ("CRONWHEEL_PORT", 8080, ("int", 0, 65535)),
    "--grpc-port": ("CRONWHEEL_GRPC_PORT", None, ("int", 0, 65535)),
    "--metrics-port": ("CRONWHEEL_METRICS_PORT", 0, ("int", 0, 65535)),
    "--database-url": ("CRONWHEEL_DATABASE_URL", "sqlite:///cronwheel.db", None),
    "--coordinator-url": ("CRONWHEEL_COORDINATOR_URL", None, None),
    "--queue-url": ("CRONWHEEL_QUEUE_URL", None, None),
    "--node-id": ("CRONWHEEL_NODE_ID", None, None),
    "--allow-commands": ("CRONWHEEL_ALLOW_COMMANDS", False, None),
    "--command-user": ("CRONWHEEL_COMMAND_USER", None, None),
    "--command-group": ("CRONWHEEL_COMMAND_GROUP", None, None),
    "--command-limit": ("CRONWHEEL_COMMAND_LIMIT", (), None),
    "--command-cwd": ("CRONWHEEL_COMMAND_CWD", "/", None),
    "--allow-python": ("CRONWHEEL_ALLOW_PYTHON", (), None),
    "--allow-network": ("CRONWHEEL_ALLOW_NETWORK", (), None),
    "--allow-plain-credentials": ("CRONWHEEL_ALLOW_PLAIN_CREDENTIALS", False, None),
    "--allowed-host": ("CRONWHEEL_ALLOWED_HOSTS", (), None),
    "--forwarded-allow-ips": ("CRONWHEEL_FORWARDED_ALLOW_IPS", "", None),
    "--protect-metrics": ("CRONWHEEL_PROTECT_METRICS", False, None),
    "--admin-only": ("CRONWHEEL_ADMIN_ONLY", (), ("command", "python", "network")),
    "--concurrency": ("CRONWHEEL_CONCURRENCY", 1024, ("int", 1, 100000)),
    "--queue": ("CRONWHEEL_QUEUE", ("default",), None),
    "--ttl": ("CRONWHEEL_TTL", 5.0, None),
    "--arm-ahead": ("CRONWHEEL_ARM_AHEAD", 30.0, ("float", 0.0, 60.0)),
    "--backfill-rate": ("CRONWHEEL_BACKFILL_RATE", 20.0, ("float", 1.0, 10_000.0)),
    "--lease": ("CRONWHEEL_LEASE", 30.0, ("float", 1.0, None)),
    "--secret-key-file": ("CRONWHEEL_SECRET_KEY_FILE", None, None),
    "--log-level": ("CRONWHEEL_LOG_LEVEL", "INFO", None),
    "--log-format": ("CRONWHEEL_LOG_FORMAT", "logfmt", ("logfmt", "json")),
    "--tracing": ("CRONWHEEL_TRACING", "off", ("off", "otlp", "console")),
    "--tls-cert": ("CRONWHEEL_TLS_CERT", None, None),
    "--tls-key": ("CRONWHEEL_TLS_KEY", None, None),
    "--tls-client-ca": ("CRONWHEEL_TLS_CLIENT_CA", None, None),
    "--retention-days": ("CRONWHEEL_RETENTION_DAYS", 30, ("int", 0, None)),
    "--retention-runs": ("CRONWHEEL_RETENTION_RUNS", 0, ("int", 0, None)),
    "--output-tail-bytes": ("CRONWHEEL_OUTPUT_TAIL_BYTES", 65536, ("int", 0, 16777216)),
    "--live-output-every": ("CRONWHEEL_LIVE_OUTPUT_EVERY", 1.0, ("float", 0.0, 3600.0)),
    "--max-body-bytes": ("CRONWHEEL_MAX_BODY_BYTES", 2097152, ("int", 1024, None)),
    "--max-header-count": ("CRONWHEEL_MAX_HEADER_COUNT", 100, ("int", 10, None)),
    "--max-header-bytes": ("CRONWHEEL_MAX_HEADER_BYTES", 32768, ("int", 1024, None)),
    "--rate-limit": ("CRONWHEEL_RATE_LIMIT", 50.0, ("float", 0, None)),
    "--rate-burst": ("CRONWHEEL_RATE_BURST", 500, ("int", 1, None)),
    "--max-jobs-per-team": ("CRONWHEEL_MAX_JOBS_PER_TEAM", 10000, ("int", 0, None)),
    "--min-interval": ("CRONWHEEL_MIN_INTERVAL", 1, ("int", 0, 604800)),
    "--max-streams": ("CRONWHEEL_MAX_STREAMS", 1000, ("int", 1, None)),
    "--max-streams-per-caller": ("CRONWHEEL_MAX_STREAMS_PER_CALLER", 16, ("int", 1, None)),
    "--oidc-issuer": ("CRONWHEEL_OIDC_ISSUER", None, None),
    "--oidc-audience": ("CRONWHEEL_OIDC_AUDIENCE", None, None),
    "--oidc-jwks-url": ("CRONWHEEL_OIDC_JWKS_URL", None, None),
    "--oidc-jwks-file": ("CRONWHEEL_OIDC_JWKS_FILE", None, None),
    "--oidc-team-claim": ("CRONWHEEL_OIDC_TEAM_CLAIM", "groups", None),
    "--oidc-team-prefix": ("CRONWHEEL_OIDC_TEAM_PREFIX", "", None),
    "--oidc-role-claim": ("CRONWHEEL_OIDC_ROLE_CLAIM", "roles", None),
    "--oidc-role": ("CRONWHEEL_OIDC_ROLES", (), None),
}

API_ONLY = {
    "--port", "--grpc-port", "--allow-plain-credentials", "--admin-only", "--max-body-bytes",
    "--max-header-count", "--max-header-bytes", "--rate-limit", "--rate-burst", "--max-jobs-per-team",
    "--min-interval", "--max-streams", "--max-streams-per-caller",
    "--oidc-issuer", "--oidc-audience", "--oidc-jwks-url", "--oidc-jwks-file",
    "--oidc-team-claim", "--oidc-team-prefix", "--oidc-role-claim", "--oidc-role",
}  # fmt: skip
SCHEDULER_ONLY = {"--arm-ahead", "--backfill-rate", "--retention-days", "--retention-runs"}
WORKER_ONLY = {
    "--command-user", "--command-group", "--command-limit", "--command-cwd", "--concurrency",
    "--output-tail-bytes", "--live-output-every",
}  # fmt: skip
TARGETS = {"--allow-commands", "--allow-python"}  # checked by the api and by every worker
METRICS = {"--metrics-port"}  # schedulers and workers serve /metrics on a port of their own
EVERY = SERVER.keys() - API_ONLY - SCHEDULER_ONLY - WORKER_ONLY - TARGETS - METRICS
ROLE_FLAGS: dict[click.Command, set[str]] = {
    api: EVERY | API_ONLY | TARGETS,
    scheduler: EVERY | SCHEDULER_ONLY | METRICS,
    worker: EVERY | WORKER_ONLY | TARGETS | METRICS,
    server: set(SERVER),
}


@pytest.fixture(autouse=True)
def no_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in os.environ:
        if name.startswith("CRONWHEEL_"):
            monkeypatch.delenv(name)


def options(command: click.Command) -> dict[str, click.Option]:
    params = command.params  # the help option aside
    command.get_params(click.Context(command))  # a node command derives its options on first use
    return {
        param.opts[0]: param for param in params if isinstance(param, click.Option) and param.opts[0] != "-h"
    }


def described(kind: click.ParamType[Any]) -> Any:
    if isinstance(kind, click.IntRange):
        return ("int", kind.min, kind.max)
    if isinstance(kind, click.FloatRange):
        return ("float", kind.min, kind.max)
    if isinstance(kind, click.Choice):
        return tuple(kind.choices)
    return None


def test_the_server_keeps_every_option_with_its_variable_default_and_range() -> None:
    given = options(server)
    assert set(given) == set(SERVER)
    values = server.make_context("server", []).params
    derived = {flag: (o.envvar, values[o.name or ""], described(o.type)) for flag, o in given.items()}
    assert derived == SERVER


@pytest.mark.parametrize("command", [api, scheduler, worker, server])
def test_each_command_takes_the_options_of_its_roles(command: click.Command) -> None:
    assert set(options(command)) == ROLE_FLAGS[command]


@pytest.mark.parametrize(
    ("command", "args"),
    [
        (scheduler, ["--port", "9000"]),
        (scheduler, ["--max-body-bytes", "4096"]),
        (worker, ["--oidc-issuer", "https://sso.example.com"]),
        (worker, ["--arm-ahead", "0"]),
        (api, ["--concurrency", "8"]),
        (api, ["--metrics-port", "9101"]),
    ],
)
def test_an_option_of_another_role_is_refused(command: click.Command, args: list[str]) -> None:
    result = CliRunner().invoke(command, args, prog_name=f"cronwheel {command.name}")
    assert result.exit_code == 2
    assert f"Error: {args[0]} is not an option of cronwheel {command.name}: it sets the " in result.stderr
    assert "which this command does not run" in result.stderr


def test_the_refusal_names_the_roles_and_commands_that_take_it() -> None:
    result = CliRunner().invoke(scheduler, ["--port", "9000"], prog_name="cronwheel scheduler")
    assert result.stderr.splitlines()[-1] == (
        "Error: --port is not an option of cronwheel scheduler: it sets the api role (cronwheel api, "
        "cronwheel server), which this command does not run"
    )
    both = CliRunner().invoke(scheduler, ["--allow-commands"]).stderr
    assert "it sets the api and worker roles (cronwheel api, cronwheel worker, cronwheel server)" in both
    unknown = CliRunner().invoke(scheduler, ["--no-such-thing"]).stderr
    assert "No such option '--no-such-thing'" in unknown


@pytest.mark.parametrize("command", [api, scheduler, worker, server])
def test_the_help_shows_only_the_roles_options_each_with_its_variable(command: click.Command) -> None:
    shown = CliRunner().invoke(command, ["--help"], terminal_width=400).stdout
    options = shown.split("Options:\n")[1].replace("  -h, --help", "  --help")
    entries = [" ".join(entry.split()) for entry in re.split(r"^  (?=--)", options, flags=re.M)[1:]]
    helped = {entry.split()[0] for entry in entries}  # each option's flag, then its help
    assert helped == ROLE_FLAGS[command] | {"--help"}  # the command alone: not under cronwheel
    for entry in entries:
        flag = entry.split()[0]
        if flag != "--help":
            assert f"[env: {SERVER[flag][0]}" in entry, flag


def test_every_node_option_has_a_variable() -> None:
    assert all(variable for variable, _, _ in SERVER.values())


def test_the_store_commands_name_the_database_variable() -> None:
    from cronwheel.cli import cli

    for args in (["db", "upgrade"], ["tokens", "create"], ["secrets", "add-key"], ["audit", "prune"]):
        shown = CliRunner().invoke(cli, [*args, "--help"], terminal_width=400).stdout
        (line,) = [line for line in shown.splitlines() if line.strip().startswith("--database-url")]
        assert "[env: CRONWHEEL_DATABASE_URL; default: sqlite:///cronwheel.db]" in line, args


def test_given_options_reach_the_settings_nested_and_converted(settings_of: Any) -> None:
    args = [
        "--max-body-bytes", "4096", "--rate-limit", "2.5", "--oidc-issuer", "https://sso.example.com",
        "--oidc-role", "ops=read", "--oidc-role", "dev=read,write", "--command-limit", "cpu=5",
        "--command-cwd", "/tmp", "--forwarded-allow-ips", "10.0.0.1, 10.1.0.0/16", "--node-id", "n1",
        "--log-format", "json",
    ]  # fmt: skip
    settings = settings_of(server, args, {})
    assert (settings.limits.max_body_bytes, settings.limits.rate_per_s) == (4096, 2.5)
    assert settings.oidc.issuer == "https://sso.example.com"
    assert settings.oidc.roles == ("ops=read", "dev=read,write")
    assert settings.command_isolation.limits.cpu_s == 5
    assert settings.command_isolation.cwd == "/tmp"
    assert settings.forwarded_allow_ips == ("10.0.0.1", "10.1.0.0/16")
    assert (settings.node, settings.log_format, settings.roles) == (
        "n1",
        "json",
        ("api", "scheduler", "worker"),
    )


def test_variables_reach_the_settings_and_an_empty_one_is_unset(settings_of: Any) -> None:
    env = {
        "CRONWHEEL_OIDC_ISSUER": "",
        "CRONWHEEL_ALLOWED_HOSTS": "a.example b.example",
        "CRONWHEEL_TTL": "2",
    }
    settings = settings_of(api, [], env)
    assert settings.oidc.issuer is None
    assert settings.allowed_hosts == ("a.example", "b.example")
    assert (settings.ttl_s, settings.roles) == (2.0, ("api",))
    assert settings.node  # host-pid when not named


def test_a_role_without_an_option_keeps_its_default(settings_of: Any) -> None:
    from cronwheel.limits import Limits
    from cronwheel.node.server import ServerSettings

    settings = settings_of(scheduler, ["--arm-ahead", "3"], {"CRONWHEEL_MAX_BODY_BYTES": "4096"})
    assert settings.limits == Limits()  # an api's variable, not read by a scheduler
    assert settings.port == ServerSettings().port
    assert settings.arm_ahead_s == 3.0


def test_a_bad_forwarded_address_is_an_error_not_a_traceback(settings_of: Any) -> None:
    result = CliRunner().invoke(server, ["--forwarded-allow-ips", "nowhere"])
    assert result.exit_code == 2
    assert "--forwarded-allow-ips takes addresses and networks" in result.output


def test_every_database_url_option_has_the_one_default() -> None:
    from cronwheel.cli import cli
    from cronwheel.node.server import ServerSettings

    assert ServerSettings().database_url == DEFAULT_DATABASE_URL
    assert options(server)["--database-url"].default == DEFAULT_DATABASE_URL
    commands = [db.commands["upgrade"]]
    for group, name in (("tokens", "create"), ("secrets", "add-key"), ("audit", "prune")):
        parent = cli.get_command(click.Context(cli), group)
        assert isinstance(parent, click.Group)
        commands.append(parent.commands[name])
    for command in commands:
        assert options(command)["--database-url"].default == DEFAULT_DATABASE_URL, command.name
