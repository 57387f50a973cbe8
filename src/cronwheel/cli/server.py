"""``cronwheel server`` (every role in one process) and ``cronwheel api|scheduler|worker`` (one
role each, for a cluster), plus ``cronwheel db upgrade``."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from cronwheel.errors import CronwheelError
from cronwheel.limits import Limits
from cronwheel.scheduler import ARM_AHEAD_S
from cronwheel.telemetry.logs import FORMATS
from cronwheel.telemetry.tracing import MODES
from cronwheel.worker.loop import CONCURRENCY

if TYPE_CHECKING:
    from cronwheel.auth.oidc.settings import OidcSettings
    from cronwheel.worker.executors.isolation import CommandIsolation

F = TypeVar("F", bound=Callable[..., Any])
_DEFAULT = Limits()


def retention_options() -> list[Callable[[F], F]]:
    """The default retention of run history (jobs without their own ``retention``) and the
    output tail kept per attempt (docs/operations.md, Retention)."""
    return [
        click.option(
            "--retention-days",
            default=30,
            show_default=True,
            envvar="CRONWHEEL_RETENTION_DAYS",
            type=click.IntRange(min=0),
            help="Runs older than this many days are deleted (0: no age limit), unless the job has its own.",
        ),
        click.option(
            "--retention-runs",
            default=0,
            show_default=True,
            envvar="CRONWHEEL_RETENTION_RUNS",
            type=click.IntRange(min=0),
            help="Runs beyond each job's newest this many are deleted (0: no count limit).",
        ),
        click.option(
            "--output-tail-bytes",
            default=65_536,
            show_default=True,
            envvar="CRONWHEEL_OUTPUT_TAIL_BYTES",
            type=click.IntRange(0, 16 * 1024 * 1024),
            help="Output kept per attempt beyond its 1 KiB excerpt (`cronwheel runs logs`); 0: none.",
        ),
    ]


def limit_options() -> list[Callable[[F], F]]:
    """The operator's limits (:class:`cronwheel.limits.Limits`), each with its CRONWHEEL_* variable."""
    return [
        click.option(
            "--max-body-bytes",
            default=_DEFAULT.max_body_bytes,
            show_default=True,
            envvar="CRONWHEEL_MAX_BODY_BYTES",
            type=click.IntRange(min=1024),
            help="The largest request body the API reads (413 beyond; the largest job is about 1.1 MiB).",
        ),
        click.option(
            "--max-header-count",
            default=_DEFAULT.max_header_count,
            show_default=True,
            envvar="CRONWHEEL_MAX_HEADER_COUNT",
            type=click.IntRange(min=10),
            help="Header fields a request may have (431 beyond).",
        ),
        click.option(
            "--max-header-bytes",
            default=_DEFAULT.max_header_bytes,
            show_default=True,
            envvar="CRONWHEEL_MAX_HEADER_BYTES",
            type=click.IntRange(min=1024),
            help="Bytes of a request's header names and values together (431 beyond).",
        ),
        click.option(
            "--rate-limit",
            "rate_per_s",
            default=_DEFAULT.rate_per_s,
            show_default=True,
            envvar="CRONWHEEL_RATE_LIMIT",
            type=click.FloatRange(min=0),
            help="API requests a second per caller, per api process (429 beyond); 0: no limit.",
        ),
        click.option(
            "--rate-burst",
            default=_DEFAULT.rate_burst,
            show_default=True,
            envvar="CRONWHEEL_RATE_BURST",
            type=click.IntRange(min=1),
            help="API requests a caller may make at once before --rate-limit applies.",
        ),
        click.option(
            "--max-jobs-per-team",
            default=_DEFAULT.max_jobs_per_team,
            show_default=True,
            envvar="CRONWHEEL_MAX_JOBS_PER_TEAM",
            type=click.IntRange(min=0),
            help="Live jobs a team may have (409 beyond); 0: no quota.",
        ),
        click.option(
            "--min-interval",
            "min_interval_s",
            default=_DEFAULT.min_interval_s,
            show_default=True,
            envvar="CRONWHEEL_MIN_INTERVAL",
            type=click.IntRange(0, 7 * 86_400),
            help="Seconds a schedule must leave between two fires, DST included (422 when closer); "
            "60 forbids sub-minute jobs.",
        ),
    ]


def oidc_options() -> list[Callable[[F], F]]:
    """OIDC JWTs as bearers (:class:`cronwheel.auth.oidc.OidcSettings`), each with its CRONWHEEL_*
    variable."""
    return [
        click.option(
            "--oidc-issuer",
            envvar="CRONWHEEL_OIDC_ISSUER",
            metavar="URL",
            help="Accept JWTs of this identity provider (their exact 'iss'). Off when unset.",
        ),
        click.option(
            "--oidc-audience",
            envvar="CRONWHEEL_OIDC_AUDIENCE",
            metavar="AUD",
            help="The 'aud' every token must hold (the client id the provider gave cronwheel).",
        ),
        click.option(
            "--oidc-jwks-url",
            envvar="CRONWHEEL_OIDC_JWKS_URL",
            metavar="URL",
            help="The provider's keys (its jwks_uri): https://, or http:// to this machine.",
        ),
        click.option(
            "--oidc-jwks-file",
            envvar="CRONWHEEL_OIDC_JWKS_FILE",
            metavar="PATH",
            help="The provider's keys in a JWK Set file (read again when a token names a new key).",
        ),
        click.option(
            "--oidc-team-claim",
            envvar="CRONWHEEL_OIDC_TEAM_CLAIM",
            default="groups",
            show_default=True,
            metavar="CLAIM",
            help="The claim holding the caller's teams (a string or a list; a.b reaches into objects).",
        ),
        click.option(
            "--oidc-team-prefix",
            envvar="CRONWHEEL_OIDC_TEAM_PREFIX",
            default="",
            metavar="PREFIX",
            help="Only values starting with this are teams, the prefix removed (cronwheel: makes "
            "cronwheel:billing the team billing); the team * is every team.",
        ),
        click.option(
            "--oidc-role-claim",
            envvar="CRONWHEEL_OIDC_ROLE_CLAIM",
            default="roles",
            show_default=True,
            metavar="CLAIM",
            help="The claim holding the caller's roles (a string or a list).",
        ),
        click.option(
            "--oidc-role",
            "oidc_roles",
            multiple=True,
            envvar="CRONWHEEL_OIDC_ROLES",
            metavar="ROLE=SCOPE[,SCOPE]",
            help="Grant a role these scopes (read, write, trigger, admin) on the caller's teams "
            "(repeatable; roles not named grant nothing).",
        ),
    ]


def tls_options() -> list[Callable[[F], F]]:
    """HTTPS for the node's endpoint (the API, or a scheduler's or worker's metrics), each with its
    CRONWHEEL_* variable; the files are read at start (docs/security.md, "Transport")."""
    return [
        click.option(
            "--tls-cert",
            envvar="CRONWHEEL_TLS_CERT",
            metavar="PEM",
            help="Serve HTTPS with this certificate (chain); needs --tls-key.",
        ),
        click.option(
            "--tls-key",
            envvar="CRONWHEEL_TLS_KEY",
            metavar="PEM",
            help="The private key of --tls-cert (PEM, not encrypted; keep it 0600).",
        ),
        click.option(
            "--tls-client-ca",
            envvar="CRONWHEEL_TLS_CLIENT_CA",
            metavar="PEM",
            help="Require a client certificate signed by this CA (mutual TLS); needs --tls-cert.",
        ),
    ]


_OIDC = ("issuer", "audience", "jwks_url", "jwks_file", "team_claim", "team_prefix", "role_claim")


def _oidc(options: dict[str, Any]) -> OidcSettings:
    """``--oidc-*`` as OidcSettings (taken out of ``options``)."""
    from cronwheel.auth.oidc.settings import OidcSettings  # noqa: PLC0415 - PyJWT only when serving

    given = {name: options.pop(f"oidc_{name}") for name in _OIDC}
    for name in ("issuer", "audience", "jwks_url", "jwks_file"):  # an empty variable is an unset one
        given[name] = given[name] or None
    return OidcSettings(**given, roles=tuple(options.pop("oidc_roles")))


_LIMITS = ("max_body_bytes", "max_header_count", "max_header_bytes", "rate_per_s", "rate_burst",
           "max_jobs_per_team", "min_interval_s")  # fmt: skip


def node_options(function: F) -> F:
    """The options every node command takes (each also read from a CRONWHEEL_* variable)."""
    options = [
        click.option("--host", default="127.0.0.1", show_default=True, envvar="CRONWHEEL_HOST"),
        click.option(
            "--port", default=8080, show_default=True, envvar="CRONWHEEL_PORT", type=click.IntRange(0, 65535)
        ),
        click.option(
            "--grpc-port",
            default=None,
            envvar="CRONWHEEL_GRPC_PORT",
            type=click.IntRange(0, 65535),
            help="Also serve the gRPC API (cronwheel.v1, with health and reflection; docs/grpc.md) on "
            "--host at this port, with --tls-cert when given (0: any free port). Unset: off.",
        ),
        click.option(
            "--metrics-port",
            default=0,
            show_default=True,
            envvar="CRONWHEEL_METRICS_PORT",
            type=click.IntRange(0, 65535),
            help="Where a scheduler or worker serves /metrics and /healthz, on --host (0: any free port, "
            "shown by `cronwheel cluster status`). A process with the api role serves them on --port.",
        ),
        click.option(
            "--database-url",
            default="sqlite:///cronwheel.db",
            show_default=True,
            envvar="CRONWHEEL_DATABASE_URL",
            help="sqlite:///path.db (embedded) or postgresql://user@host:5432/db (cluster; TLS: "
            "?sslmode=verify-full&sslrootcert=CA[&sslcert=...&sslkey=...]).",
        ),
        click.option(
            "--coordinator-url",
            envvar="CRONWHEEL_COORDINATOR_URL",
            help="etcd://host:2379[,host:2379] (cluster; TLS: "
            "etcd+https://user:password@host:2379?cacert=CA). Unset: this process owns every shard.",
        ),
        click.option(
            "--queue-url",
            envvar="CRONWHEEL_QUEUE_URL",
            help="redis://host:6379/0 (cluster; TLS: rediss://user:password@host:port/0?ssl_ca_certs=CA). "
            "Unset: in-process.",
        ),
        click.option("--node-id", envvar="CRONWHEEL_NODE_ID", help="This node's name (default: host-pid)."),
        click.option(
            "--allow-commands", is_flag=True, envvar="CRONWHEEL_ALLOW_COMMANDS", help="Allow command targets."
        ),
        click.option(
            "--command-user",
            envvar="CRONWHEEL_COMMAND_USER",
            metavar="USER",
            help="Run command targets as this user (needs root). Default: nobody when running as root, "
            "else this process's user.",
        ),
        click.option(
            "--command-group",
            envvar="CRONWHEEL_COMMAND_GROUP",
            metavar="GROUP",
            help="Run command targets with this group. Default: the command user's primary group.",
        ),
        click.option(
            "--command-limit",
            "command_limits",
            multiple=True,
            metavar="NAME=VALUE",
            help="A resource limit of every command: cpu (s), as, fsize (bytes, K/M/G), nofile, nproc; "
            "'unlimited' lifts one. Defaults: cpu=3600 as=8G nofile=1024 fsize=1G nproc=512 (for a "
            "command user of its own).",
        ),
        click.option(
            "--command-cwd",
            default="/",
            metavar="DIR",
            show_default=True,
            envvar="CRONWHEEL_COMMAND_CWD",
            help="Where a command target without cwd starts.",
        ),
        click.option(
            "--allow-python",
            multiple=True,
            metavar="PATTERN",
            help="Allow python targets 'module:function' (fnmatch, naming its top-level package: "
            "'mypkg.jobs:*').",
        ),
        click.option(
            "--allow-network",
            multiple=True,
            metavar="CIDR",
            help="Let webhooks reach this non-public network.",
        ),
        click.option(
            "--allow-plain-credentials",
            is_flag=True,
            envvar="CRONWHEEL_ALLOW_PLAIN_CREDENTIALS",
            help="Store credentials given in clear in jobs (Authorization and other credential headers, "
            "URL user info and tokens, broker passwords) and notification rules (Slack URLs, webhook "
            "URLs with user info or tokens). Off: they must be secret references.",
        ),
        click.option(
            "--allowed-host",
            "allowed_hosts",
            multiple=True,
            metavar="NAME",
            envvar="CRONWHEEL_ALLOWED_HOSTS",
            help="Serve requests for this Host name too (repeatable; *.example.com: its subdomains; "
            "*: any, behind a proxy that checks it). IP addresses and localhost are always served.",
        ),
        click.option(
            "--forwarded-allow-ips",
            default="",
            envvar="CRONWHEEL_FORWARDED_ALLOW_IPS",
            metavar="IP[,CIDR...]",
            help="Take the client address and scheme from X-Forwarded-For and X-Forwarded-Proto only "
            "when the peer is one of these proxies (comma-separated addresses or networks). Unset: never.",
        ),
        click.option(
            "--protect-metrics",
            is_flag=True,
            envvar="CRONWHEEL_PROTECT_METRICS",
            help="/metrics needs a token of every team with the read scope.",
        ),
        click.option(
            "--admin-only",
            multiple=True,
            type=click.Choice(["command", "python", "network"]),
            envvar="CRONWHEEL_ADMIN_ONLY",
            help="Only admins of every team may set this kind of target (repeatable; network: an HTTP "
            "target that only --allow-network makes acceptable).",
        ),
        click.option(
            "--concurrency",
            default=CONCURRENCY,
            show_default=True,
            type=click.IntRange(1, 100_000),
            help="Attempts each worker runs at once.",
        ),
        click.option(
            "--queue", "queues", multiple=True, default=("default",), show_default=True, metavar="NAME"
        ),
        click.option(
            "--ttl", "ttl_s", default=5.0, show_default=True, envvar="CRONWHEEL_TTL", help="Lease TTL (s)."
        ),
        click.option(
            "--arm-ahead",
            "arm_ahead_s",
            default=ARM_AHEAD_S,
            show_default=True,
            envvar="CRONWHEEL_ARM_AHEAD",
            type=click.FloatRange(min=0.0, max=60.0),
            help="Record runs up to this long before their slot and only queue them at it (s; the "
            "lead grows with how many jobs a second holds, from 1 s); 0: record at the slot.",
        ),
        click.option(
            "--lease",
            "lease_s",
            default=30.0,
            show_default=True,
            envvar="CRONWHEEL_LEASE",
            type=click.FloatRange(min=1.0),
            help="How long a worker's claim on a running attempt lasts between renewals (s).",
        ),
        click.option(
            "--secret-key-file",
            envvar="CRONWHEEL_SECRET_KEY_FILE",
            metavar="PATH",
            help="The keys that encrypt team secrets (ID:BASE64 lines; the last encrypts new values). "
            "Or the keys themselves in CRONWHEEL_SECRET_KEYS. Embedded default: <database>.keys, "
            "created by the first start.",
        ),
        click.option("--log-level", default="INFO", show_default=True, envvar="CRONWHEEL_LOG_LEVEL"),
        click.option(
            "--log-format",
            type=click.Choice(FORMATS),
            default="logfmt",
            show_default=True,
            envvar="CRONWHEEL_LOG_FORMAT",
            help="Log lines on stderr: logfmt key=value pairs, or one JSON object per line (same keys).",
        ),
        click.option(
            "--tracing",
            type=click.Choice(MODES),
            default="off",
            show_default=True,
            envvar="CRONWHEEL_TRACING",
            help="OpenTelemetry spans of firing, claims and attempts: to an OTLP/HTTP collector "
            "(OTEL_EXPORTER_OTLP_ENDPOINT ...) or as JSON on stdout. Needs cronwheel[otel].",
        ),
        *tls_options(),
        *retention_options(),
        *limit_options(),
        *oidc_options(),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _run(roles: tuple[str, ...], **options: Any) -> None:
    from cronwheel.node.server import (  # noqa: PLC0415
        ServerSettings,
        default_node,
        serve,
        trusted_proxies,
        tune_collector,
    )
    from cronwheel.secrets.keys import ENV_KEYS  # noqa: PLC0415
    from cronwheel.telemetry import logs  # noqa: PLC0415 - imported late: other commands stay quick to start

    logs.configure(options.pop("log_level"), options.pop("log_format"))
    allow_python = options.pop("allow_python")
    allow_network = options.pop("allow_network")
    limits = Limits(**{name: options.pop(name) for name in _LIMITS})
    try:
        settings = ServerSettings(
            forwarded_allow_ips=trusted_proxies(options.pop("forwarded_allow_ips")),
            roles=roles,
            node=options.pop("node_id") or default_node(),
            python_allow=allow_python,
            allowed_networks=allow_network,
            command_isolation=_isolation(options),
            secret_keys=os.environ.get(ENV_KEYS) or None,  # never an option: options land in `ps`
            smtp_url=os.environ.get("CRONWHEEL_SMTP_URL") or None,  # nor this: it may hold a password
            limits=limits,
            oidc=_oidc(options),
            **options,
        )
        tune_collector()
        asyncio.run(serve(settings, announce=lambda text: click.echo(text, err=True)))
    except CronwheelError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(2)


def _isolation(options: dict[str, Any]) -> CommandIsolation:
    """``--command-*`` as a CommandIsolation (taken out of ``options``)."""
    from cronwheel.worker.executors.isolation import CommandIsolation, CommandLimits  # noqa: PLC0415

    return CommandIsolation(
        user=options.pop("command_user"),
        group=options.pop("command_group"),
        limits=CommandLimits.parse(options.pop("command_limits")),
        cwd=options.pop("command_cwd"),
    )


@click.command()
@node_options
def server(**options: Any) -> None:
    """Start cronwheel: API, scheduler and workers in one process (embedded backends by default)."""
    _run(("api", "scheduler", "worker"), **options)


@click.command()
@node_options
def api(**options: Any) -> None:
    """Run the REST API role (cluster mode)."""
    _run(("api",), **options)


@click.command()
@node_options
def scheduler(**options: Any) -> None:
    """Run the scheduler role: fire the shards this node leases (cluster mode)."""
    _run(("scheduler",), **options)


@click.command()
@node_options
def worker(**options: Any) -> None:
    """Run the worker role: attempt runs from the queue (cluster mode)."""
    _run(("worker",), **options)


@click.group()
def db() -> None:
    """Database maintenance."""


@db.command()
@click.option(
    "--database-url", default="sqlite:///cronwheel.db", show_default=True, envvar="CRONWHEEL_DATABASE_URL"
)
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
