"""Running a node: ``cronwheel server`` (every role, embedded backends by default) and
``cronwheel api|scheduler|worker`` (one role each, cluster backends).

The API, the scheduler, the sweeper and a worker pool run as named tasks in one task group: if one
dies the others are stopped and the process exits non-zero, instead of limping on. The notifier
runs in every node whatever its roles, working while the node holds the watchdog duty (in a
cluster every member campaigns for it, so the dead-man's switch outlives the schedulers). SIGTERM and
SIGINT stop it gracefully: the API stops accepting, the scheduler stops firing, running attempts
get a grace period to finish. Every node serves its own metrics: on the API port with the api
role, else on ``--metrics-port`` (:mod:`cronwheel.node.metrics_http`), and advertises where in its
coordinator member record (``cronwheel cluster status`` shows it).

Embedded (SQLite), the server keeps an admin token in ``<database>.token`` (0600), made on its
first start, and says where it is (:mod:`cronwheel.auth.localtoken`); a cluster's first token is made
with ``cronwheel tokens create --bootstrap``. Who may reach the API (served hosts, protected
metrics, targets reserved to admins) is the :class:`~cronwheel.api.callers.access.AccessPolicy` built from
the settings (:func:`access_policy`).

The api and worker roles hold the keys that seal team secrets (:mod:`cronwheel.secrets.keys`):
read at start from ``CRONWHEEL_SECRET_KEYS`` or ``--secret-key-file``, or, in embedded mode, from
the key file next to the database, which the first start creates. The start-up lines say where
the keys came from and which one seals new values, never a key.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import gc
import ipaddress
import logging
import os
import signal
import socket
import ssl
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import uvicorn

from cronwheel.api.app import ApiServices, create_app
from cronwheel.api.callers.access import AccessPolicy
from cronwheel.api.callers.auth import TokenAuthenticator
from cronwheel.api.guards.limits import head_buffer_bytes
from cronwheel.api.guards.nosniff import NoSniff
from cronwheel.auth import localtoken
from cronwheel.auth.oidc import OidcAuthenticator, OidcSettings
from cronwheel.clock import AnchoredClock, Clock, SystemClock
from cronwheel.cluster import gauges as metrics_live
from cronwheel.cluster.mode import Mode, mode_of
from cronwheel.cluster.status import ClusterStatus
from cronwheel.coordinator import Coordinator
from cronwheel.errors import CronwheelError, PermanentError
from cronwheel.jobs.service import ChangeFeed, JobService, TargetPolicy
from cronwheel.limits import Limits
from cronwheel.model import RetentionPolicy
from cronwheel.node import admin_token, metrics_http
from cronwheel.node.backends import close_quietly, coordinator_at, queue_at, store_at
from cronwheel.node.timekeeping import anchor_once, keep_anchored
from cronwheel.notifier import loop as notifications
from cronwheel.notifier.channels import SmtpSettings
from cronwheel.queue import Queue
from cronwheel.redaction import redact_url
from cronwheel.retrying import CONNECT, retry
from cronwheel.scheduler import ARM_AHEAD_S
from cronwheel.scheduler.backfill import BACKFILL_RUNS_PER_S
from cronwheel.scheduler.backfiller import Backfiller
from cronwheel.scheduler.loop import Scheduler
from cronwheel.scheduler.purger import BATCH, EMBEDDED_BATCH, Purger
from cronwheel.scheduler.sweeper import Sweeper
from cronwheel.secrets.crypto import Keyring
from cronwheel.secrets.keys import ENV_KEY_FILE, ENV_KEYS, KeySource, load_keyring
from cronwheel.secrets.resolve import SecretResolver
from cronwheel.secrets.service import SecretService
from cronwheel.settings import API, DEFAULT_DATABASE_URL, ROLES, SCHEDULER, WORKER, nested, option
from cronwheel.store.change_listener import PostgresChangeListener
from cronwheel.store.files import open_private
from cronwheel.store.sql import SqlStore
from cronwheel.targets import python as python_targets
from cronwheel.telemetry.logs import FORMATS, LogFormat
from cronwheel.telemetry.tracing import MODES, OFF, TraceMode, Tracer
from cronwheel.telemetry.tracing import check as check_tracing
from cronwheel.telemetry.tracing import started as tracing_started
from cronwheel.tls import ServerTls
from cronwheel.worker.executors import Executors
from cronwheel.worker.executors.base import WorkerSettings
from cronwheel.worker.executors.isolation import CommandIsolation
from cronwheel.worker.loop import CONCURRENCY, Worker
from cronwheel.worker.refusals import warn_refused_jobs

log = logging.getLogger("cronwheel.server")

# The cyclic garbage collector's thresholds for a node: a young collection every 50,000
# net allocations instead of 700, and full collections ten times rarer. A scheduler holds a large
# heap (every job of the horizon) and allocates fast while firing; with the defaults, full
# collections scan that heap every few seconds. Measured with ``benchmarks/bench_fire.py``
# (steady, 100,000 jobs, embedded): 0.7 s in the collector over the run against 3.2 s with the
# defaults, p99 queued lateness 228 ms against 442 ms. Cycles are still collected, only in bigger,
# rarer passes.
GC_THRESHOLDS = (50_000, 20, 100)


def tune_collector() -> None:
    """Set :data:`GC_THRESHOLDS` and move what start-up created (modules, settings) out of the
    collector's scans (``gc.freeze``). Call it once per process, before serving."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def default_node() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


ALL_ROLES = ROLES
ONLY_API, ONLY_SCHEDULER, ONLY_WORKER = frozenset({API}), frozenset({SCHEDULER}), frozenset({WORKER})
_URL_FIELDS = ("database_url", "coordinator_url", "queue_url")  # may name a password


_ANY_PORT = {"low": 0, "high": 65535}
_TARGETS = frozenset({API, WORKER})  # checked when a job is written (api) and at every attempt (worker)
_METRICS_OWN = frozenset({SCHEDULER, WORKER})  # nodes that serve /metrics on a port of their own


@dataclass(frozen=True, slots=True)
class ServerSettings:
    """What a node runs and how; each field that is an option says so (:mod:`cronwheel.settings`).
    ``secret_keys`` and ``smtp_url`` are not: they come from the environment only
    (``CRONWHEEL_SECRET_KEYS``, ``CRONWHEEL_SMTP_URL``), since options show in ``ps``."""

    host: str = field(default="127.0.0.1", metadata=option("--host", "The address to listen on."))
    port: int = field(  # the API's (nodes with the api role serve /metrics there too)
        default=8080,
        metadata=option("--port", "The API's port (0: any free port).", roles=ONLY_API, **_ANY_PORT),
    )
    metrics_port: int = field(  # /metrics and /healthz of a node without the api role; 0: any free port
        default=0,
        metadata=option(
            "--metrics-port",
            "Where a scheduler or worker serves /metrics and /healthz, on --host (0: any free port, "
            "shown by `cronwheel cluster status`). A process with the api role serves them on --port.",
            roles=_METRICS_OWN,
            **_ANY_PORT,
        ),
    )
    grpc_port: int | None = field(  # the gRPC API beside REST on nodes with the api role; None: off
        default=None,
        metadata=option(
            "--grpc-port",
            "Also serve the gRPC API (cronwheel.v1, with health and reflection; docs/grpc.md) on "
            "--host at this port, with --tls-cert when given (0: any free port). Unset: off.",
            roles=ONLY_API,
            **_ANY_PORT,
        ),
    )
    database_url: str = field(
        default=DEFAULT_DATABASE_URL,
        metadata=option(
            "--database-url",
            "sqlite:///path.db (embedded) or postgresql://user@host:5432/db (cluster; TLS: "
            "?sslmode=verify-full&sslrootcert=CA[&sslcert=...&sslkey=...]).",
        ),
    )
    coordinator_url: str | None = field(  # etcd://host:port[,...]; None: this process owns every shard
        default=None,
        metadata=option(
            "--coordinator-url",
            "etcd://host:2379[,host:2379] (cluster; TLS: "
            "etcd+https://user:password@host:2379?cacert=CA). Unset: this process owns every shard.",
        ),
    )
    queue_url: str | None = field(  # redis://host:port; None: in-process queue
        default=None,
        metadata=option(
            "--queue-url",
            "redis://host:6379/0 (cluster; TLS: rediss://user:password@host:port/0?ssl_ca_certs=CA). "
            "Unset: in-process.",
        ),
    )
    roles: tuple[str, ...] = ALL_ROLES  # the command's, not an option
    allow_commands: bool = field(
        default=False,
        metadata=option("--allow-commands", "Allow command targets.", roles=_TARGETS, is_flag=True),
    )
    python_allow: tuple[str, ...] = field(
        default=(),
        metadata=option(
            "--allow-python",
            "Allow python targets 'module:function' (fnmatch, naming its top-level package: 'mypkg.jobs:*').",
            roles=_TARGETS,
            metavar="PATTERN",
            multiple=True,
        ),
    )
    allowed_networks: tuple[str, ...] = field(  # targets and webhook notifications (every node's notifier)
        default=(),
        metadata=option(
            "--allow-network",
            "Let webhooks reach this non-public network.",
            metavar="CIDR",
            multiple=True,
        ),
    )
    allow_plain_credentials: bool = field(  # store credentials given in clear (refused by default)
        default=False,
        metadata=option(
            "--allow-plain-credentials",
            "Store credentials given in clear in jobs (Authorization and other credential headers, "
            "URL user info and tokens, broker passwords) and notification rules (Slack URLs, webhook "
            "URLs with user info or tokens). Off: they must be secret references.",
            roles=ONLY_API,
            is_flag=True,
        ),
    )
    command_isolation: CommandIsolation = field(  # user, limits, cwd (--command-*)
        default_factory=CommandIsolation, metadata=nested()
    )
    concurrency: int = field(  # attempts each worker runs at once
        default=CONCURRENCY,
        metadata=option(
            "--concurrency",
            "Attempts each worker runs at once.",
            roles=ONLY_WORKER,
            low=1,
            high=100_000,
        ),
    )
    queues: tuple[str, ...] = field(  # a scheduler's metrics report the depth of these queues
        default=("default",),
        metadata=option(
            "--queue",
            "A queue this node works on (repeatable): a worker takes its triggers, the API accepts "
            "jobs of it, every node's /metrics reports its depth.",
            metavar="NAME",
            multiple=True,
        ),
    )
    lease_s: float = field(
        default=30.0,
        metadata=option(
            "--lease", "How long a worker's claim on a running attempt lasts between renewals (s).", low=1.0
        ),
    )
    ttl_s: float = field(  # coordinator membership / shard lease TTL
        default=5.0, metadata=option("--ttl", "Lease TTL (s).")
    )
    arm_ahead_s: float = field(  # scheduler: record runs up to this long before their slot (0: at it)
        default=ARM_AHEAD_S,
        metadata=option(
            "--arm-ahead",
            "Record runs up to this long before their slot and only queue them at it (s; the "
            "lead grows with how many jobs a second holds, from 1 s); 0: record at the slot.",
            roles=ONLY_SCHEDULER,
            low=0.0,
            high=60.0,
        ),
    )
    backfill_rate: float = field(  # the leader's backfiller: one bound for the whole cluster
        default=BACKFILL_RUNS_PER_S,
        metadata=option(
            "--backfill-rate",
            "Runs the backfiller records per second, all backfills together (the leader's scheduler).",
            roles=ONLY_SCHEDULER,
            low=1.0,
            high=10_000.0,
        ),
    )
    node: str = field(
        default_factory=default_node,
        metadata=option("--node-id", "This node's name (default: host-pid)."),
    )
    allowed_hosts: tuple[str, ...] = field(  # Host names served beyond the defaults (see access_policy)
        default=(),
        metadata=option(
            "--allowed-host",
            "Serve requests for this Host name too (repeatable; *.example.com: its subdomains; "
            "*: any, behind a proxy that checks it). IP addresses and localhost are always served.",
            metavar="NAME",
            multiple=True,
            env="CRONWHEEL_ALLOWED_HOSTS",
        ),
    )
    forwarded_allow_ips: tuple[str, ...] = field(  # proxies whose X-Forwarded-For/-Proto are believed
        default=(),
        metadata=option(
            "--forwarded-allow-ips",
            "Take the client address and scheme from X-Forwarded-For and X-Forwarded-Proto only "
            "when the peer is one of these proxies (comma-separated addresses or networks). Unset: never.",
            metavar="IP[,CIDR...]",
        ),
    )
    protect_metrics: bool = field(
        default=False,
        metadata=option(
            "--protect-metrics", "/metrics needs a token of every team with the read scope.", is_flag=True
        ),
    )
    admin_only: tuple[str, ...] = field(  # target kinds only admins of every team may set
        default=(),
        metadata=option(
            "--admin-only",
            "Only admins of every team may set this kind of target (repeatable; network: an HTTP "
            "target that only --allow-network makes acceptable).",
            roles=ONLY_API,
            choices=("command", "python", "network"),
            multiple=True,
        ),
    )
    secret_key_file: str | None = field(
        default=None,
        metadata=option(
            "--secret-key-file",
            "The keys that encrypt team secrets (ID:BASE64 lines; the last encrypts new values). "
            "Or the keys themselves in CRONWHEEL_SECRET_KEYS. Embedded default: <database>.keys, "
            "created by the first start.",
            metavar="PATH",
        ),
    )
    secret_keys: str | None = field(default=None, repr=False)  # CRONWHEEL_SECRET_KEYS: the keys themselves
    limits: Limits = field(
        default_factory=Limits, metadata=nested()
    )  # what a request, a caller and a team may take
    oidc: OidcSettings = field(
        default_factory=OidcSettings, metadata=nested()
    )  # JWTs of an identity provider
    tls_cert: str | None = field(
        default=None,
        metadata=option(
            "--tls-cert", "Serve HTTPS with this certificate (chain); needs --tls-key.", metavar="PEM"
        ),
    )
    tls_key: str | None = field(
        default=None,
        metadata=option(
            "--tls-key", "The private key of --tls-cert (PEM, not encrypted; keep it 0600).", metavar="PEM"
        ),
    )
    tls_client_ca: str | None = field(
        default=None,
        metadata=option(
            "--tls-client-ca",
            "Require a client certificate signed by this CA (mutual TLS); needs --tls-cert.",
            metavar="PEM",
        ),
    )

    def server_tls(self) -> ssl.SSLContext | None:
        """The TLS context of this node's HTTP endpoint (None: plain HTTP), every file read now:
        one that cannot be used is a :class:`~cronwheel.tls.TlsConfigError`."""
        if not (self.tls_cert and self.tls_key):
            return None
        return ServerTls(self.tls_cert, self.tls_key, self.tls_client_ca).context()

    def grpc_tls(self) -> ServerTls | None:
        """The certificate the gRPC API serves with: the HTTP endpoint's (None: plaintext)."""
        if not (self.tls_cert and self.tls_key):
            return None
        return ServerTls(self.tls_cert, self.tls_key, self.tls_client_ca)

    smtp_url: str | None = field(default=None, repr=False)  # CRONWHEEL_SMTP_URL: email notifications' relay
    retention_days: int = field(  # the default retention of jobs without their own (0: no age limit)
        default=30,
        metadata=option(
            "--retention-days",
            "Runs older than this many days are deleted (0: no age limit), unless the job has its own.",
            roles=ONLY_SCHEDULER,
            low=0,
        ),
    )
    retention_runs: int = field(  # ... and of how many runs per job (0: no count limit)
        default=0,
        metadata=option(
            "--retention-runs",
            "Runs beyond each job's newest this many are deleted (0: no count limit).",
            roles=ONLY_SCHEDULER,
            low=0,
        ),
    )
    output_tail_bytes: int = field(  # output kept per attempt beyond its 1 KiB excerpt
        default=65_536,
        metadata=option(
            "--output-tail-bytes",
            "Output kept per attempt beyond its 1 KiB excerpt (`cronwheel runs logs`); 0: none.",
            roles=ONLY_WORKER,
            low=0,
            high=16 * 1024 * 1024,
        ),
    )
    live_output_s: float = field(  # a running attempt's output so far, to the store at most this often
        default=1.0,
        metadata=option(
            "--live-output-every",
            "A running attempt's output so far is written to the store at most this often (s), "
            "when it changed, for the run page's live tail; 0: only at the attempt's end.",
            roles=ONLY_WORKER,
            low=0.0,
            high=3600.0,
        ),
    )
    tracing: TraceMode = field(  # OpenTelemetry spans of runs (otlp, console; cronwheel[otel])
        default="off",
        metadata=option(
            "--tracing",
            "OpenTelemetry spans of firing, claims and attempts: to an OTLP/HTTP collector "
            "(OTEL_EXPORTER_OTLP_ENDPOINT ...) or as JSON on stdout. Needs cronwheel[otel].",
            choices=MODES,
        ),
    )
    log_level: str = field(
        default="INFO", metadata=option("--log-level", "The least severe log lines written (on stderr).")
    )
    log_format: LogFormat = field(
        default="logfmt",
        metadata=option(
            "--log-format",
            "Log lines on stderr: logfmt key=value pairs, or one JSON object per line (same keys).",
            choices=FORMATS,
        ),
    )

    def __repr__(self) -> str:
        """Every field, each backend URL with its password and secret parameters hidden: settings
        may end up in a log line or a traceback (the keys and the SMTP URL are left out whole)."""
        shown = []
        for name in self.__dataclass_fields__:
            if not self.__dataclass_fields__[name].repr:
                continue
            value = getattr(self, name)
            if name in _URL_FIELDS and isinstance(value, str):
                value = redact_url(value)
            shown.append(f"{name}={value!r}")
        return f"ServerSettings({', '.join(shown)})"

    @property
    def mode(self) -> Mode:
        """What the backend URLs select (:mod:`cronwheel.cluster.mode`)."""
        return mode_of(self.database_url, self.coordinator_url, self.queue_url)

    @property
    def embedded(self) -> bool:
        return self.mode.embedded

    def retention(self) -> RetentionPolicy:
        """The retention policy of jobs without their own (docs/operations.md, Retention)."""
        return RetentionPolicy(self.retention_days or None, self.retention_runs or None)

    def isolation(self) -> CommandIsolation:
        """How commands run here: a root worker runs them as ``nobody`` unless told otherwise."""
        return self.command_isolation.defaulted(self.allow_commands)

    def check(self) -> None:
        """Refuse combinations that cannot work, before touching any backend."""
        python_targets.check_patterns(self.python_allow)  # `*` would open the standard library
        if self.allow_commands and "worker" in self.roles:
            self.isolation().identity()  # a user that does not exist, or that we cannot become
        self.limits.check()
        trusted_proxies(",".join(self.forwarded_allow_ips))
        self.oidc.check()
        check_tracing(self.tracing)  # otlp without the SDK installed: stop now, naming the extra
        if bool(self.tls_cert) != bool(self.tls_key) or (self.tls_client_ca and not self.tls_cert):
            raise PermanentError("HTTPS needs both --tls-cert and --tls-key (--tls-client-ca needs them too)")
        if self.smtp_url is not None:
            SmtpSettings.from_url(self.smtp_url)  # a relay that cannot be read: stop now
        unknown = set(self.roles) - set(ALL_ROLES)
        if unknown or not self.roles:
            raise PermanentError(f"roles must be among {', '.join(ALL_ROLES)}, not {sorted(unknown)}")
        if not self.mode.valid:
            raise PermanentError(
                "a cluster keeps its state in PostgreSQL: with --coordinator-url or --queue-url, set "
                "CRONWHEEL_DATABASE_URL=postgresql://... too (SQLite serves one `cronwheel server`)"
            )
        if self.embedded and set(self.roles) != set(ALL_ROLES):
            raise PermanentError(
                "the embedded backends (SQLite, in-process queue and coordinator) need every role in one "
                "process: run `cronwheel server`, or set CRONWHEEL_DATABASE_URL=postgresql://... "
                "(a cluster on PostgreSQL alone; add CRONWHEEL_COORDINATOR_URL=etcd://... and "
                "CRONWHEEL_QUEUE_URL=redis://... to coordinate and queue elsewhere)"
            )


def access_policy(settings: ServerSettings) -> AccessPolicy:
    """Who may reach this node's HTTP endpoint. Served hosts: IP literals and ``localhost`` always
    (:mod:`cronwheel.api.guards.host`), the ``--host`` name the node binds, this machine's own names when
    it binds every address (its announced URL uses one), and ``--allowed-host``."""
    hosts = list(settings.allowed_hosts)
    if settings.host in ("", "0.0.0.0", "::"):  # noqa: S104 - naming a wildcard bind, not making one
        hosts += [socket.gethostname(), socket.getfqdn()]
    else:
        hosts.append(settings.host)
    return AccessPolicy(
        allowed_hosts=tuple(dict.fromkeys(host.lower() for host in hosts if host)),
        protect_metrics=settings.protect_metrics,
        admin_only=frozenset(settings.admin_only),
    )


def trusted_proxies(text: str) -> tuple[str, ...]:
    """``--forwarded-allow-ips``: comma-separated IP addresses or networks (CIDR), each checked."""
    named = tuple(part.strip() for part in text.split(",") if part.strip())
    for entry in named:
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            example = "192.0.2.10, 10.0.0.0/8"
            raise PermanentError(
                f"--forwarded-allow-ips takes addresses and networks ({example}), not {entry!r}"
            ) from None
    return named


def http_config(app: Callable[..., Any], settings: ServerSettings, **options: Any) -> uvicorn.Config:
    """uvicorn's configuration of this node's HTTP endpoint. ``X-Forwarded-For`` and
    ``X-Forwarded-Proto`` are believed only from the proxies the operator names
    (``--forwarded-allow-ips``); by default from none, so that the client address the rate limits
    count and the audit log records is the peer's own (uvicorn would believe any peer on loopback,
    and read its ``FORWARDED_ALLOW_IPS`` variable)."""
    trusted = list(settings.forwarded_allow_ips)
    return uvicorn.Config(
        app,
        log_config=None,
        access_log=False,
        proxy_headers=bool(trusted),
        forwarded_allow_ips=trusted,
        **options,
    )


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the process handles SIGTERM once, for all roles."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve(settings: ServerSettings, announce: Callable[[str], None] = print) -> None:
    """Run this node's roles until SIGTERM/SIGINT (or until one role fails).

    Everything the node opens is entered on one ``AsyncExitStack``, each piece with its own
    cleanup, in the order the roles need them: the listening socket (bound before any backend is
    touched, so a port in use stops the process at once), the store, the queue, the coordinator,
    then what the roles open. Whatever fails, at start or later, closes what was opened before it,
    in reverse order."""
    settings.check()
    async with contextlib.AsyncExitStack() as stack:
        if settings.embedded:
            stack.enter_context(_single_owner(settings.database_url))
        listening = stack.enter_context(_listening(settings))
        tls = settings.server_tls()  # its files read now: one that cannot be used stops the node
        keys = _keys(settings)
        metrics_url = public_url(settings.host, listening, tls) + "/metrics"
        store = await stack.enter_async_context(store_at(settings.database_url))  # migrated first
        clock = await _clock(settings, store)
        queue = await stack.enter_async_context(
            queue_at(settings.queue_url, clock, settings.lease_s * 2, settings.database_url)
        )
        coordinator = await stack.enter_async_context(
            coordinator_at(
                settings.coordinator_url,
                settings.node,
                settings.roles,
                clock,
                settings.ttl_s,
                metrics_url,
                settings.database_url,
            )
        )
        tracing = tracing_started(settings.tracing, settings.node, settings.roles)
        tracer = await stack.enter_async_context(tracing)  # closed after the roles: spans exported
        backends = _Backends(store, queue, coordinator, clock, listening, keys, tls, tracer)
        live = metrics_live.Source(settings.node, queue, settings.queues, coordinator)
        metrics_live.attach(live)  # /metrics reads queue stats, shards and leadership when scraped
        stack.callback(metrics_live.detach, live)
        notes = await _local_token(settings, backends) if settings.embedded else (_backends_line(settings),)
        await _run_roles(settings, backends, stack, announce, notes)


async def _local_token(settings: ServerSettings, backends: _Backends) -> tuple[str, ...]:
    """The embedded server's admin token file (:mod:`cronwheel.auth.localtoken`), made or kept; the
    line that says where it is (never the token), announced once the API serves. A pointer to it
    is left for a fixed loopback port."""
    url = public_url(settings.host, backends.listening, backends.tls) if settings.port else ""
    now = backends.clock.now()
    path = await admin_token.ensure(backends.store, settings.database_url, now, url, os.environ)
    if path is None:
        return ()
    log.info("admin token file", extra={"action": "token_file", "path": str(path)})
    return (f"admin token in {path} (the cronwheel CLI on this machine uses it)",)


def _backends_line(settings: ServerSettings) -> str:
    """Where a cluster node's backends are, for its start-up lines: never a password
    (:func:`cronwheel.redaction.redact_url`)."""
    store = redact_url(settings.database_url)
    queue = redact_url(settings.queue_url) if settings.queue_url else "the store's database"
    coordinator = redact_url(settings.coordinator_url) if settings.coordinator_url else "the store's database"
    return f"backends ({settings.mode.name}): store {store}, queue {queue}, coordinator {coordinator}"


def _keys(settings: ServerSettings) -> KeySource | None:
    """The keys of a node with the api or worker role (see the module docstring), read before any
    backend is touched: keys that cannot be read stop the node at once. Embedded mode creates
    its key file on the first start. None: a node that needs no keys (a scheduler)."""
    if not {"api", "worker"} & set(settings.roles) and not (settings.secret_keys or settings.secret_key_file):
        return None  # a scheduler given keys uses them to sign notifications (if it holds the watchdog)
    database = _sqlite_path(settings.database_url) if settings.embedded else None
    default = None if database is None else Path(f"{database}.keys").resolve()
    return load_keyring(settings.secret_keys, settings.secret_key_file, default)


def _keys_line(keys: KeySource, node: str) -> str:
    """Where the keys came from and which one seals new values (never a key), for the start-up
    lines; a node without keys also logs a warning."""
    if keys.keyring is None:
        log.warning(
            "no secret keys: secrets cannot be set here, and attempts of jobs that refer to one fail",
            extra={"action": "keys", "node": node, "hint": f"set {ENV_KEYS} or {ENV_KEY_FILE}"},
        )
        return f"secret keys: {keys.origin}; secrets cannot be stored or read by this node"
    advice = ": back it up with the database" if keys.created else ""
    return f"secret keys: {keys.origin}{advice} (new values sealed with key {keys.keyring.newest.id})"


def _oidc_line(oidc: OidcSettings) -> tuple[str, ...]:
    """The start-up line that says which provider's tokens the API accepts (none: OIDC is off)."""
    if not oidc.enabled:
        return ()
    return (f"OIDC: tokens of {oidc.issuer} for {oidc.audience}, keys from {oidc.keys_origin}",)


def _after(first: str, announce: Callable[[str], None]) -> Callable[[str], None]:
    """``announce``, saying ``first`` before its first line (the start-up lines come together,
    once the node serves)."""
    pending = [first]

    def said(line: str) -> None:
        while pending:
            announce(pending.pop())
        announce(line)

    return said


async def _clock(settings: ServerSettings, store: SqlStore) -> Clock:
    """Embedded: the machine's clock. Cluster: every node fires, leases and records by the
    store's clock (``cronwheel.node.timekeeping``), read once before anything else happens."""
    if settings.embedded:
        return SystemClock()
    anchored = AnchoredClock()
    await retry("store clock", lambda: anchor_once(anchored, store), CONNECT)
    return anchored


@dataclass(frozen=True, slots=True)
class _Backends:
    store: SqlStore
    queue: Queue
    coordinator: Coordinator
    clock: Clock
    listening: socket.socket  # the API's socket, or the metrics endpoint's
    keys: KeySource | None  # the keys that seal team secrets (None: a node that needs none)
    tls: ssl.SSLContext | None = None  # the HTTP endpoint's (None: plain HTTP)
    tracer: Tracer = field(default=OFF)  # spans of runs (--tracing; off: none)

    @property
    def keyring(self) -> Keyring | None:
        return None if self.keys is None else self.keys.keyring


async def _run_roles(
    settings: ServerSettings,
    backends: _Backends,
    stack: contextlib.AsyncExitStack,
    announce: Callable[[str], None],
    notes: tuple[str, ...] = (),
) -> None:
    """The roles as named tasks of one task group, until ``stop``. A role that fails stops the
    others; a cronwheel error that did is raised alone (the CLI prints it and exits non-zero).
    ``notes`` are announced after the line that says where the node serves."""
    stop = asyncio.Event()
    _on_signals(stop)
    try:
        async with asyncio.TaskGroup() as group:
            await _Roles(settings, backends, stop, group, stack, notes).start(announce)
    except BaseExceptionGroup as failed:
        errors = failed.exceptions
        if len(errors) == 1 and isinstance(errors[0], CronwheelError):
            raise errors[0] from None
        raise


@dataclass
class _Roles:
    """Builds and starts the roles this node runs, each as a named task; what a role opens is
    closed by ``stack`` after every task has ended."""

    settings: ServerSettings
    backends: _Backends
    stop: asyncio.Event
    group: asyncio.TaskGroup
    stack: contextlib.AsyncExitStack
    notes: tuple[str, ...] = ()
    secrets: SecretResolver | None = None  # the worker's, which the API tells of changes in one process
    listener: PostgresChangeListener | None = None  # cluster: job changes (_job_changes)

    async def start(self, announce: Callable[[str], None]) -> None:
        roles = self.settings.roles
        if self.backends.keys is not None:
            announce = _after(_keys_line(self.backends.keys, self.settings.node), announce)
        feed = ChangeFeed()
        clock = self.backends.clock
        if isinstance(clock, AnchoredClock):
            self._task(keep_anchored(clock, self.backends.store, self.stop, self.settings.node), "clock")
        if "scheduler" in roles:
            await self._scheduler(feed)
        if "worker" in roles:
            self._worker()
        self._watchdog()
        if "api" in roles:
            await self._api(feed, announce)
        else:
            self._metrics(announce)

    async def _job_changes(self, feed: ChangeFeed) -> ChangeFeed | PostgresChangeListener:
        """Where this process hears of job changes: embedded, the job service's own feed; in a
        cluster, one ``LISTEN`` on the store shared by the scheduler and the API's event streams
        (every process's writes, started at its first use)."""
        if self.settings.embedded:
            return feed
        if self.listener is None:
            listener = PostgresChangeListener(self.settings.database_url)
            await retry("job-change-listener", listener.start, CONNECT)
            self.stack.push_async_callback(close_quietly, "job-change-listener", listener.stop)
            self._task(listener.supervise(self.stop), "listener")
            self.listener = listener
        return self.listener

    def _task(self, role: Awaitable[None], name: str) -> None:
        self.group.create_task(_until_stop(role, self.stop), name=name)

    async def _scheduler(self, feed: ChangeFeed) -> None:
        settings, clock = self.settings, self.backends.clock
        store, queue = self.backends.store, self.backends.queue
        changes = (await self._job_changes(feed)).subscribe()
        ownership = None if settings.embedded else self.backends.coordinator
        scheduler = Scheduler(
            store, queue, clock, settings.node,
            ownership=ownership, stall_s=settings.ttl_s, tracer=self.backends.tracer,
            arm_ahead_s=settings.arm_ahead_s,
        )  # fmt: skip
        self.backends.coordinator.set_health_check(scheduler.healthy)
        # a cluster sweeps every second: a scheduler killed between its store commit and its queue
        # publish leaves PENDING runs that only the sweep queues, and their lateness is this period
        sweeper = Sweeper(store, queue, clock, every_s=5.0 if settings.embedded else 1.0)
        if settings.embedded:
            await sweeper.recover_after_restart(clock.now())
        leader = None if settings.embedded else self._is_leader
        self._task(scheduler.run(changes, self.stop), "scheduler")
        self._task(sweeper.run(self.stop, leader), "sweeper")
        # the leader's too, as the sweep: one purge at a time
        purger = Purger(
            store, clock, settings.retention(), batch=EMBEDDED_BATCH if settings.embedded else BATCH
        )
        self._task(purger.run(self.stop, leader), "retention")
        # the leader's too: one backfiller keeps the backfill rate bound for the whole cluster
        backfiller = Backfiller(store, queue, clock, runs_per_s=settings.backfill_rate)
        self._task(backfiller.run(self.stop, leader), "backfill")

    async def _is_leader(self) -> bool:
        return await self.backends.coordinator.leader() == self.settings.node

    def _watchdog(self) -> None:
        """The notifier (the dead-man's switch and the outbox's delivery) runs in every node,
        whatever its roles. In a cluster it works only while this node holds the watchdog duty,
        which every member campaigns for: so it keeps watching when the schedulers it watches
        are gone. A node whose notifier cannot reach its store gives the duty up."""
        settings, coordinator = self.settings, self.backends.coordinator
        notifier, close = notifications.build(
            self.backends.store, self.backends.clock, allowed_networks=settings.allowed_networks,
            keyring=self.backends.keyring, smtp_url=settings.smtp_url,
        )  # fmt: skip
        self.stack.push_async_callback(close)
        coordinator.set_watchdog_check(notifier.able)
        holds = None if settings.embedded else self._holds_watchdog
        self._task(notifier.run(self.stop, holds), "notifier")

    async def _holds_watchdog(self) -> bool:
        return await self.backends.coordinator.watchdog() == self.settings.node

    def _worker(self) -> None:
        settings = self.settings
        allowed = WorkerSettings(
            allow_commands=settings.allow_commands,
            python_allow=settings.python_allow,
            allowed_networks=settings.allowed_networks,
            isolation=settings.isolation(),
            output_tail_bytes=settings.output_tail_bytes,
        )
        self.secrets = SecretResolver(self.backends.store, self.backends.keyring, clock=self.backends.clock)
        executors = Executors(allowed, secrets=self.secrets)
        self.stack.push_async_callback(executors.close)
        worker = Worker(
            self.backends.store,
            self.backends.queue,
            executors,
            self.backends.clock,
            settings.node,
            queues=settings.queues,
            concurrency=settings.concurrency,
            lease_s=settings.lease_s,
            tracer=self.backends.tracer,
            output_every_s=settings.live_output_s,
        )
        self._task(worker.run(self.stop), "worker")
        check = warn_refused_jobs(self.backends.store, allowed, settings.queues, settings.node)
        self.group.create_task(_unless_stopped(check, self.stop), name="refused-jobs")

    async def _api(self, feed: ChangeFeed, announce: Callable[[str], None]) -> None:
        settings, store, clock = self.settings, self.backends.store, self.backends.clock
        policy = TargetPolicy(
            settings.allow_commands,
            settings.python_allow,
            settings.allowed_networks,
            queues=settings.queues,
            allow_plain_credentials=settings.allow_plain_credentials,
        )
        service = JobService(
            store, self.backends.queue, feed, clock, policy,
            limits=settings.limits, tracer=self.backends.tracer,
        )  # fmt: skip
        status = ClusterStatus(
            store, self.backends.queue, self.backends.coordinator, settings.queues, settings.mode, clock
        )
        forget = None if self.secrets is None else self.secrets.forget  # this process's worker
        secrets = SecretService(store, self.backends.keyring, clock, changed=forget)
        services = ApiServices(
            store=store,
            job_service=service,
            clock=clock,
            cluster=status,
            access=access_policy(settings),
            secrets=secrets,
            authenticators=self._oidc(),
            changes=await self._job_changes(feed),
        )
        app = create_app(services)
        if settings.grpc_port is not None:
            self._grpc(services, announce)
        url = public_url(settings.host, self.backends.listening, self.backends.tls)
        lines = (
            f"cronwheel serving on {url} (node {settings.node})",
            f"dashboard: {url}/ui (log in with an API token)",  # cronwheel.api.routes.ui
            *self.notes,
            *_oidc_line(settings.oidc),
        )
        config = http_config(app, settings, h11_max_incomplete_event_size=head_buffer_bytes(settings.limits))

        def started() -> None:
            for line in lines:
                announce(line)

        self._http(config, started, "api")

    def _grpc(self, services: ApiServices, announce: Callable[[str], None]) -> None:
        """The gRPC API (cronwheel.grpc_api) on ``--grpc-port``, supervised like the HTTP one: it
        ends with the node, and a failure stops the node."""
        from cronwheel.grpc_api import serve_grpc  # noqa: PLC0415 - grpc only on a node that serves it

        settings = self.settings
        assert settings.grpc_port is not None
        tls = settings.grpc_tls()

        def started(port: int) -> None:
            scheme = "TLS" if tls is not None else "plaintext"
            announce(f"gRPC API on {settings.host}:{port} ({scheme}; cronwheel.v1, health, reflection)")

        serving = serve_grpc(services, settings.host, settings.grpc_port, self.stop, tls, started)
        self._task(serving, "grpc")

    def _oidc(self) -> tuple[OidcAuthenticator, ...]:
        """The identity provider's authenticator when the operator named one (its keys are
        fetched on the first JWT that arrives, and closed with the node)."""
        if not self.settings.oidc.enabled:
            return ()
        authenticator = OidcAuthenticator.of(self.settings.oidc, self.backends.clock)
        self.stack.push_async_callback(authenticator.close)
        return (authenticator,)

    def _metrics(self, announce: Callable[[str], None]) -> None:
        """A node without the API serves ``/metrics`` and ``/healthz`` on its metrics port."""
        settings = self.settings
        url = public_url(settings.host, self.backends.listening, self.backends.tls) + "/metrics"
        line = f"cronwheel {'+'.join(settings.roles)} running (node {settings.node}, metrics on {url})"
        authenticator = TokenAuthenticator(self.backends.store, self.backends.clock)
        endpoint = metrics_http.Endpoint(access_policy(settings), authenticator.authenticate)
        config = http_config(NoSniff(endpoint), settings, lifespan="off", interface="asgi3")
        self._http(config, lambda: announce(line), "metrics")

    def _http(self, config: uvicorn.Config, started: Callable[[], None], name: str) -> None:
        tls = self.backends.tls
        if tls is not None:  # HTTPS with the context built (and checked) at start, not uvicorn's
            config.load()
            config.ssl = tls
        server = _Server(config)
        self.group.create_task(_serve_http(server, self.backends.listening, self.stop, started), name=name)


async def _serve_http(
    server: _Server, listening: socket.socket, stop: asyncio.Event, started: Callable[[], None]
) -> None:
    serving = asyncio.create_task(server.serve(sockets=[listening]))
    while not server.started and not serving.done():
        await asyncio.sleep(0.02)
    if server.started:
        started()
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait({serving, stopper}, return_when=asyncio.FIRST_COMPLETED)
    server.should_exit = True
    stopper.cancel()
    await serving
    stop.set()  # the endpoint ended (stopped, or failed): stop every role


async def _until_stop(role: Awaitable[None], stop: asyncio.Event) -> None:
    try:
        await role
    finally:
        stop.set()


async def _unless_stopped(work: Coroutine[Any, Any, Any], stop: asyncio.Event) -> None:
    """A one-off task: ends when ``work`` does (without stopping the node), or is cut short by
    ``stop``. A cut-short ``work`` is waited for until it has ended: ``cancel()`` only asks, and
    its result does not exist before (asking for it raised InvalidStateError when the node was
    stopped while the work still ran)."""
    task = asyncio.ensure_future(work)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
        if not task.done():
            task.cancel()
            await asyncio.wait({task})  # a cancelled task is done only once it has unwound
    if not task.cancelled():
        task.result()  # a failure is the node's: raised


def _on_signals(stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


@contextlib.contextmanager
def _listening(settings: ServerSettings) -> Iterator[socket.socket]:
    """The socket this node serves HTTP on, bound now (listening once the server starts): the
    API's ``--port`` on a node with the api role, else ``--metrics-port``."""
    port = settings.port if "api" in settings.roles else settings.metrics_port
    listening = bind(settings.host, port)
    try:
        yield listening
    finally:
        listening.close()


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (0: any free port), not yet listening. A port in
    use or an address this machine does not have is a PermanentError."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on connections of a socket that says so,
    # and without it every keep-alive response waited ~40 ms for the client's delayed ACK
    listening = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((host, port))
    except OSError as error:
        listening.close()
        reason = error.strerror or error
        hint = "see --port and --metrics-port"
        raise PermanentError(f"cannot listen on {host}:{port}: {reason} ({hint})") from None
    listening.set_inheritable(False)
    return listening


def public_url(host: str, listening: socket.socket, tls: ssl.SSLContext | None = None) -> str:
    """``http://host:port`` (``https://`` with ``tls``) of a bound socket, as other machines may
    reach it: a wildcard bind (0.0.0.0, ::) is named by this machine's host name."""
    port = listening.getsockname()[1]
    if host in ("", "0.0.0.0", "::"):  # noqa: S104 - naming a wildcard bind, not making one
        host = socket.gethostname()
    scheme = "https" if tls is not None else "http"
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


@contextlib.contextmanager
def _single_owner(database_url: str) -> Iterator[None]:
    """Embedded mode owns its SQLite file alone: a second server on the same file would break the
    restart recovery (which treats every lease as orphaned). A lock file enforces it."""
    path = _sqlite_path(database_url)
    if path is None:
        yield
        return
    lock_path = Path(f"{path}.lock")
    handle: IO[str] = os.fdopen(open_private(lock_path), "a")  # 0600, as the database
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PermanentError(f"another cronwheel server is using {path} (lock {lock_path})") from None
        yield
    finally:
        handle.close()


_sqlite_path = localtoken.sqlite_path
