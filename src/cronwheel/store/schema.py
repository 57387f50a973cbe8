"""The metadata store's tables (SQLAlchemy Core), shared by SQLite and PostgreSQL.

Portable by construction: instants are BigInteger epoch microseconds (:class:`Instant`), JSON
values use the generic ``JSON`` type, enums are short strings guarded by CHECK constraints, and
the partial indexes carry both ``sqlite_where`` and ``postgresql_where``. The Alembic revisions in
``migrations/versions`` build exactly this schema (``tests/store/test_migrations.py`` compares
them).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    false,
    func,
    literal_column,
    type_coerce,
)
from sqlalchemy.types import TypeDecorator

from cronwheel.lateness import LATE_START
from cronwheel.model import BackfillState, Outcome, RunKind, RunState

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def to_micros(value: datetime) -> int:
    """Exact epoch microseconds of an aware instant; naive datetimes are refused."""
    if not isinstance(value, datetime):
        raise TypeError(f"expected an aware datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"naive datetime {value.isoformat()} refused: instants must be aware (UTC)")
    return (value - EPOCH) // _MICROSECOND


def from_micros(value: int) -> datetime:
    return EPOCH + timedelta(microseconds=value)


class Instant(TypeDecorator[datetime]):
    """An aware instant stored as BigInteger epoch microseconds; read back as aware UTC."""

    impl = BigInteger
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> int | None:
        return None if value is None else to_micros(value)

    def process_result_value(self, value: Any | None, dialect: Dialect) -> datetime | None:
        return None if value is None else from_micros(int(value))


def _in(column: str, values: list[str]) -> str:
    return f"{column} IN ({', '.join(repr(value) for value in values)})"


_STATES = [state.value for state in RunState]
_KINDS = [kind.value for kind in RunKind]
_OUTCOMES = [outcome.value for outcome in Outcome]
_BACKFILL_STATES = [state.value for state in BackfillState]

ID = String(36)  # UUIDv7 text
NAME = String(200)
STATE = String(16)

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

jobs = Table(
    "jobs",
    metadata,
    Column("id", ID, primary_key=True),
    Column("team", NAME, nullable=False),
    Column("name", NAME, nullable=False),
    Column("shard", Integer, nullable=False),  # model.shard_of(id), fixed at insert
    Column("schedule", Text, nullable=False),
    Column("timezone", String(64), nullable=False),
    Column("description", Text, nullable=False),
    Column("dst_gap", String(8), nullable=True),
    Column("dst_fold", String(8), nullable=True),
    Column("target", JSON, nullable=False),
    Column("payload", JSON(none_as_null=True), nullable=True),
    Column("timeout_s", Float, nullable=False),
    Column("retry", JSON, nullable=False),
    Column("misfire", JSON, nullable=False),
    Column("overlap", String(16), nullable=False),
    Column("start_at", Instant, nullable=True),
    Column("end_at", Instant, nullable=True),
    Column("paused", Boolean, nullable=False),
    Column("pause_note", Text, nullable=True),
    Column("paused_at", Instant, nullable=True),
    Column("queue", NAME, nullable=False),
    Column("labels", JSON, nullable=False),  # [[key, value], ...] in the job's order
    Column("retention", JSON(none_as_null=True), nullable=True),  # migration 0009; NULL: server default
    # migration 0018: the names of the team's calendars the job lists, the shift of its excluded
    # slots, and the union of those calendars' specs (NULL: none), rewritten with every calendar edit
    Column("calendars", JSON, nullable=False, server_default="[]"),
    Column("calendar_shift", String(8), nullable=False, server_default="none"),
    Column("calendar_spec", JSON(none_as_null=True), nullable=True),
    Column("delete_after_success", Boolean, nullable=False, server_default=false()),  # migration 0019
    Column("version", Integer, nullable=False),
    Column("created_at", Instant, nullable=False),
    Column("updated_at", Instant, nullable=False),
    Column("next_run_at", Instant, nullable=True),
    Column("deleted_at", Instant, nullable=True),
    Column("jitter_s", Float, nullable=False),  # migration 0017; 0: each slot fires at the slot
)

# Predicates shared by the partial indexes and the queries that must use them (SQLite only uses
# a partial index when the query's WHERE contains the index's terms literally).
JOB_LIVE = jobs.c.deleted_at.is_(None)
JOB_DUE = and_(jobs.c.deleted_at.is_(None), jobs.c.paused == false())

Index(
    "uq_jobs_team_name_live",
    jobs.c.team,
    jobs.c.name,
    unique=True,
    sqlite_where=JOB_LIVE,
    postgresql_where=JOB_LIVE,
)
Index("ix_jobs_due", jobs.c.shard, jobs.c.next_run_at, sqlite_where=JOB_DUE, postgresql_where=JOB_DUE)
# (next_run_at, id): the order a scheduler pages its due jobs in (keyset), ties included
Index("ix_jobs_due_at", jobs.c.next_run_at, jobs.c.id, sqlite_where=JOB_DUE, postgresql_where=JOB_DUE)

job_labels = Table(
    "job_labels",
    metadata,
    Column("job_id", ID, ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
    Column("key", NAME, nullable=False),
    Column("value", NAME, nullable=False),
    PrimaryKeyConstraint("job_id", "key", "value"),
    # job_id last: one label's jobs in id order, as list_jobs pages them (migration 0004)
    Index("ix_job_labels_key_value_job_id", "key", "value", "job_id"),
)

runs = Table(
    "runs",
    metadata,
    Column("id", ID, primary_key=True),
    Column("job_id", ID, ForeignKey("jobs.id"), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("slot", Instant, nullable=False),
    Column("dedup_key", String(300), nullable=False),  # model.dedup_key: one run per slot / key
    Column("state", STATE, nullable=False),
    Column("queue", NAME, nullable=False),
    Column("job_version", Integer, nullable=False),
    Column("reason", Text, nullable=True),
    Column("payload", JSON(none_as_null=True), nullable=True),
    Column("has_payload", Boolean, nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("lost_attempts", Integer, nullable=False),
    Column("idempotency_key", NAME, nullable=True),
    Column("created_at", Instant, nullable=False),
    Column("queued_at", Instant, nullable=True),
    Column("started_at", Instant, nullable=True),
    Column("finished_at", Instant, nullable=True),
    Column("next_attempt_at", Instant, nullable=True),
    Column("lease_owner", NAME, nullable=True),
    Column("lease_expires_at", Instant, nullable=True),
    Column("cancel_requested", Boolean, nullable=False),
    Column("epoch", BigInteger, nullable=True),  # the shard's fencing epoch it was fired under
    Column("traceparent", String(55), nullable=True),  # W3C trace context of the run's trace (0010)
    Column("due_at", Instant, nullable=True),  # the slot's jittered fire time (0017); NULL: the slot
    UniqueConstraint("job_id", "dedup_key"),
    CheckConstraint(_in("state", _STATES), name="state"),
    CheckConstraint(_in("kind", _KINDS), name="kind"),
    Index("ix_runs_state_next_attempt_at", "state", "next_attempt_at"),
    Index("ix_runs_job_id_slot", "job_id", "slot"),
    Index("ix_runs_job_id_state_slot", "job_id", "state", "slot"),  # latest of each state (0009)
    Index("ix_runs_slot_id", "slot", "id"),
    # a fifth of each page free: the queued stamp is a heap-only update (migration 0013)
    postgresql_with={"fillfactor": 80},
)

# The runs list's filters that no column index serves (``GET /v1/runs?reason=`` and ``?late=true``,
# store.sql.runs): partial indexes in the list's order, holding only the few runs that match, so a
# page of them never walks the whole history (migration 0023). The predicates are shared by the
# indexes and the query, literally (SQLite needs the index's terms in the query's WHERE, and a
# literal threshold lets PostgreSQL use the index under a generic plan too).
RUN_REASONED = runs.c.reason.is_not(None)
RUN_STARTED_LATE = type_coerce(runs.c.started_at, BigInteger) - func.coalesce(
    type_coerce(runs.c.due_at, BigInteger), type_coerce(runs.c.slot, BigInteger)
) > literal_column(str(LATE_START // timedelta(microseconds=1)))
Index(
    "ix_runs_reasoned_slot_id",
    runs.c.slot,
    runs.c.id,
    sqlite_where=RUN_REASONED,
    postgresql_where=RUN_REASONED,
)
Index(
    "ix_runs_late_slot_id",
    runs.c.slot,
    runs.c.id,
    sqlite_where=RUN_STARTED_LATE,
    postgresql_where=RUN_STARTED_LATE,
)

# Each job's latest run (by slot, then id) and that run's state: written by the store's own
# statements in the transaction of every insert, state change and deletion of runs
# (store.sql.last_runs; migration 0012), so that ``list_jobs(last_state=...)`` joins one narrow row
# per job instead of finding each job's latest run. Index (state, job_id, team): one state's jobs in
# id order, as list_jobs pages them, with the job's team (a copy of jobs.team) read from the index
# itself, so that a team's filter (every team-scoped token's list) needs no visit of other teams'
# jobs. No foreign key on run_id: retention deletes runs first, then corrects.
job_last_run = Table(
    "job_last_run",
    metadata,
    Column("job_id", ID, ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True),
    Column("team", NAME, nullable=False),
    Column("slot", Instant, nullable=False),
    Column("run_id", ID, nullable=False),
    Column("state", STATE, nullable=False),
    Index("ix_job_last_run_state_job_id_team", "state", "job_id", "team"),
)

# A job's backfills and their progress (migration 0016): the backfiller moves ``cursor_at`` (the
# earliest instant whose slots remain; NULL once through) and the counts in the transaction that
# records each batch's runs (store.sql.backfills), so the row is always what was recorded.
backfills = Table(
    "backfills",
    metadata,
    Column("id", ID, primary_key=True),
    Column("job_id", ID, ForeignKey("jobs.id"), nullable=False),
    Column("start_at", Instant, nullable=False),
    Column("end_at", Instant, nullable=False),
    Column("total", Integer, nullable=False),
    Column("created", Integer, nullable=False),
    Column("existing", Integer, nullable=False),
    Column("cursor_at", Instant, nullable=True),
    Column("state", String(16), nullable=False),
    Column("created_at", Instant, nullable=False),
    Column("updated_at", Instant, nullable=False),
    CheckConstraint(_in("state", _BACKFILL_STATES), name="state"),
    Index("ix_backfills_job_id_created_at", "job_id", "created_at"),
)

BACKFILL_RUNNING = backfills.c.state == literal_column(f"'{BackfillState.RUNNING.value}'")
Index(
    "ix_backfills_running",
    backfills.c.created_at,
    sqlite_where=BACKFILL_RUNNING,
    postgresql_where=BACKFILL_RUNNING,
)

# A literal, not a bound parameter: SQLite uses a partial index only for literally matching terms.
RUN_RUNNING = runs.c.state == literal_column(f"'{RunState.RUNNING.value}'")
Index("ix_runs_lease", runs.c.lease_expires_at, sqlite_where=RUN_RUNNING, postgresql_where=RUN_RUNNING)

attempts = Table(
    "attempts",
    metadata,
    Column("run_id", ID, ForeignKey("runs.id"), nullable=False),
    Column("number", Integer, nullable=False),
    Column("worker", NAME, nullable=False),
    Column("started_at", Instant, nullable=False),
    Column("finished_at", Instant, nullable=True),
    Column("outcome", String(16), nullable=True),
    Column("status_code", Integer, nullable=True),
    Column("exit_code", Integer, nullable=True),
    Column("error", Text, nullable=True),
    Column("output", Text, nullable=True),
    Column("retry_after_s", Float, nullable=True),
    Column("output_tail", Text, nullable=True),  # migration 0009: the bounded tail of the output
    # migration 0010: [[name, value], ...] the HTTP request was sent with, credentials redacted
    Column("request_headers", JSON(none_as_null=True), nullable=True),
    # migration 0024: when the output so far was last written (a running attempt's live tail)
    Column("output_at", Instant, nullable=True),
    # migration 0024: [[name, value], ...] the HTTP target answered with, credentials redacted
    Column("response_headers", JSON(none_as_null=True), nullable=True),
    PrimaryKeyConstraint("run_id", "number"),
    CheckConstraint(_in("outcome", _OUTCOMES), name="outcome"),
)

run_events = Table(
    "run_events",
    metadata,
    # BIGINT identity on PostgreSQL; INTEGER PRIMARY KEY (the rowid) on SQLite.
    Column("id", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True),
    Column("run_id", ID, ForeignKey("runs.id"), nullable=False),
    Column("at", Instant, nullable=False),
    Column("state", STATE, nullable=False),
    Column("previous", STATE, nullable=True),
    Column("attempt", Integer, nullable=False),
    Column("node", NAME, nullable=True),
    Column("detail", Text, nullable=True),
    Index("ix_run_events_run_id_id", "run_id", "id"),
)

# The fencing token of each shard (guarantee 1, docs/guarantees.md): the epoch (etcd revision) of the
# newest shard lease any scheduler has claimed. A firing write carrying an older epoch is refused.
shard_epochs = Table(
    "shard_epochs",
    metadata,
    Column("shard", Integer, primary_key=True, autoincrement=False),
    Column("epoch", BigInteger, nullable=False),
    Column("node", Text, nullable=False),  # the node that claimed ``epoch`` (informational)
    Column("updated_at", Instant, nullable=False),
)

# API tokens (cronwheel.auth.tokens): the digest of each token, never the token. ``team`` NULL: every
# team. Revoked tokens keep their row (listed as revoked, named in the audit log).
api_tokens = Table(
    "api_tokens",
    metadata,
    Column("id", String(36), primary_key=True),  # the token's public id (cronwheel.auth.tokens)
    Column("name", NAME, nullable=False),
    Column("team", NAME, nullable=True),
    Column("scopes", JSON, nullable=False),  # sorted list of scope names
    Column("digest", String(64), nullable=False),  # hex SHA-256 of the whole token
    Column("created_at", Instant, nullable=False),
    Column("created_by", String(36), nullable=True),
    Column("expires_at", Instant, nullable=True),
    Column("last_used_at", Instant, nullable=True),
    Column("revoked_at", Instant, nullable=True),
    Index("ix_api_tokens_team_created_at", "team", "created_at"),
)

# Team secrets, sealed (cronwheel.secrets.crypto: AES-256-GCM bound to team and name); ``key_id``
# names the key that sealed ``value``, so that a keyring holding several keys opens every row
# while ``cronwheel secrets reencrypt`` moves them to the newest.
secrets = Table(
    "secrets",
    metadata,
    Column("team", NAME, nullable=False),
    Column("name", NAME, nullable=False),
    Column("key_id", String(64), nullable=False),
    Column("value", LargeBinary, nullable=False),
    Column("created_at", Instant, nullable=False),
    Column("updated_at", Instant, nullable=False),
    PrimaryKeyConstraint("team", "name"),
)

# A team's named calendars of closed days (migration 0018): ``spec`` is the JSON of
# ``cronwheel.schedule.calendar.spec_to_json``; jobs hold a resolved copy (``jobs.calendar_spec``).
calendars = Table(
    "calendars",
    metadata,
    Column("team", NAME, nullable=False),
    Column("name", NAME, nullable=False),
    Column("description", Text, nullable=False),
    Column("spec", JSON, nullable=False),
    Column("version", Integer, nullable=False),
    Column("created_at", Instant, nullable=False),
    Column("updated_at", Instant, nullable=False),
    PrimaryKeyConstraint("team", "name"),
)

# The audit log (cronwheel.audit): appended to, never updated (the API has no way to change or
# delete an entry; docs/security.md says how an operator prunes old ones). Listed newest first by
# (at, id), of some teams (``team``: None for entries that are no one team's).
audit_log = Table(
    "audit_log",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("at", Instant, nullable=False),
    Column("team", NAME, nullable=True),
    Column("action", String(40), nullable=False),
    Column("actor_kind", String(20), nullable=False),
    Column("actor_id", String(200), nullable=True),
    Column("actor_name", String(200), nullable=True),
    Column("client", String(100), nullable=True),
    Column("target_kind", String(20), nullable=True),
    Column("target_id", String(300), nullable=True),
    Column("target_name", String(300), nullable=True),
    Column("outcome", String(20), nullable=False),
    Column("status", Integer, nullable=True),
    Column("detail", Text, nullable=True),
    Column("before", JSON, nullable=True),
    Column("after", JSON, nullable=True),
    Index("ix_audit_log_at", "at", "id"),
    Index("ix_audit_log_team_at", "team", "at", "id"),
)

# Notifications (cronwheel.notifications, migration 0008). ``notification_rules``: a team's default
# rules (``scope`` "team:<team>") or a job's own (``scope`` "job:<id>"), as rules_to_json writes them.
notification_rules = Table(
    "notification_rules",
    metadata,
    Column("scope", String(250), primary_key=True),
    Column("team", NAME, nullable=False),
    Column("job_id", ID, nullable=True),
    Column("rules", JSON, nullable=False),
    Column("updated_at", Instant, nullable=False),
    Index("ix_notification_rules_team", "team"),
)

# Runs that just reached SUCCESS or FAILED, written in the transaction of that state change
# (store.sql.bulk.insert_events) and consumed (deleted) by the notifier, which decides.
notification_inbox = Table(
    "notification_inbox",
    metadata,
    Column("id", BigInteger().with_variant(Integer(), "sqlite"), primary_key=True, autoincrement=True),
    Column("run_id", ID, nullable=False),
    Column("at", Instant, nullable=False),
)

# Each job's notification state, one row per aspect (cronwheel.notifications.decide).
notification_health = Table(
    "notification_health",
    metadata,
    Column("job_id", ID, nullable=False),
    Column("aspect", String(40), nullable=False),
    Column("value", String(16), nullable=False),
    Column("since", Instant, nullable=False),
    PrimaryKeyConstraint("job_id", "aspect"),
)

# The outbox: one row per (notification, channel), written with the state change that caused it,
# delivered (and retried) by the notifier. ``id`` is stable: the notification id and the channel's.
notification_outbox = Table(
    "notification_outbox",
    metadata,
    Column("id", String(120), primary_key=True),
    Column("notification_id", String(64), nullable=False),
    Column("team", NAME, nullable=False),
    Column("job_id", ID, nullable=True),
    Column("event", String(16), nullable=False),
    Column("channel", JSON, nullable=False),
    Column("message", JSON, nullable=False),
    Column("created_at", Instant, nullable=False),
    Column("state", String(16), nullable=False),  # pending, sent, failed
    Column("attempts", Integer, nullable=False),
    Column("next_attempt_at", Instant, nullable=True),
    Column("finished_at", Instant, nullable=True),
    Column("last_error", Text, nullable=True),
    Index("ix_notification_outbox_state_next_attempt_at", "state", "next_attempt_at"),
)

# The trigger queue on PostgreSQL (cronwheel.queue.postgres; migration 0020): one row per trigger
# not yet acknowledged. ``available_at`` is when it is due (the scheduler's clock);
# ``claimed_until`` and ``deliveries`` are the current hand-out (the database's clock). Present on
# SQLite too, unused there: the schema is one on both databases.
triggers = Table(
    "triggers",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("queue", NAME, nullable=False),
    Column("run_id", ID, nullable=False),
    Column("job_id", ID, nullable=False),
    Column("slot", Instant, nullable=True),
    Column("available_at", Instant, nullable=False),
    Column("deliveries", Integer, nullable=False),
    Column("claimed_until", Instant, nullable=True),
    Column("consumer", NAME, nullable=True),
    Index("ix_triggers_queue_available_at", "queue", "available_at"),
    # every hand-out rewrites the row (no indexed column changes): room for it on its page, and
    # autovacuum after a small share of dead rows, as rows are deleted on every ack
    postgresql_with={"fillfactor": 80, "autovacuum_vacuum_scale_factor": 0.01},
)

# The coordinator on PostgreSQL (cronwheel.coordinator.postgres; migration 0021). Every lease
# carries ``expires_at`` by the database's clock (``clock_timestamp()`` + TTL) and names its holder
# by ``node`` and ``incarnation`` (a random id per join). Members: one row per node name, live while
# ``expires_at`` is ahead; ``since`` is the node's own clock (as it reported it), the other
# instants the database's. Present on SQLite too, unused there: the schema is one on both.
coordination_members = Table(
    "coordination_members",
    metadata,
    Column("node", NAME, primary_key=True),
    Column("incarnation", BigInteger, nullable=False),
    Column("roles", Text, nullable=False),  # comma-separated
    Column("metrics_url", Text, nullable=True),
    Column("since", Instant, nullable=True),
    Column("joined_at", Instant, nullable=False),
    Column("renewed_at", Instant, nullable=False),
    Column("expires_at", Instant, nullable=False),
)

# The elected duties (``leader``, ``watchdog``): one row per duty, kept for good; its holder is
# NULL while free. The leader's row also carries the shard assignment it published (JSON: owners).
coordination_duties = Table(
    "coordination_duties",
    metadata,
    Column("duty", String(32), primary_key=True),
    Column("node", NAME, nullable=True),
    Column("incarnation", BigInteger, nullable=True),
    Column("expires_at", Instant, nullable=True),
    Column("assignment", Text, nullable=True),
)

# One row per shard, kept for good: the current holder (NULL when free) and the fencing epoch of
# its ownership, raised by every hand-over.
coordination_shards = Table(
    "coordination_shards",
    metadata,
    Column("shard", Integer, primary_key=True, autoincrement=False),
    Column("node", NAME, nullable=True),
    Column("incarnation", BigInteger, nullable=True),
    Column("epoch", BigInteger, nullable=False),
    Column("expires_at", Instant, nullable=True),
)

# Dead letters of the trigger queue on PostgreSQL (migration 0022): triggers handed out
# ``max_deliveries`` times without an acknowledgement, moved here from ``triggers`` instead of
# being handed out again; the newest ``dead_letter_max`` per queue are kept. ``trigger_id`` is the
# ``triggers`` row it was; ``dead_at`` is by the database's clock.
dead_triggers = Table(
    "dead_triggers",
    metadata,
    Column("id", BigInteger, primary_key=True, autoincrement=True),
    Column("queue", NAME, nullable=False),
    Column("trigger_id", BigInteger, nullable=False),
    Column("run_id", ID, nullable=False),
    Column("job_id", ID, nullable=False),
    Column("slot", Instant, nullable=True),
    Column("deliveries", Integer, nullable=False),
    Column("dead_at", Instant, nullable=False),
    Index("ix_dead_triggers_queue_id", "queue", "id"),
)
