"""Initial schema: jobs, job_labels, runs, attempts, run_events.

Revision ID: 0001
Revises:
Create Date: 2026-01-01

A frozen snapshot: later schema changes get new revisions, never edits here. Instants are
BIGINT epoch microseconds (``cronwheel.store.schema.Instant``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

_STATES = "'PENDING', 'RUNNING', 'RETRYING', 'SUCCESS', 'FAILED', 'SKIPPED'"
_KINDS = "'scheduled', 'manual'"
_OUTCOMES = "'success', 'failure', 'timeout', 'error', 'cancelled', 'lost'"


def _id(name: str = "id", *, nullable: bool) -> sa.Column[str]:
    return sa.Column(name, sa.String(36), nullable=nullable)


def _instant(name: str, nullable: bool) -> sa.Column[int]:
    return sa.Column(name, sa.BigInteger(), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "jobs",
        _id(nullable=False),
        sa.Column("team", sa.String(200), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("shard", sa.Integer(), nullable=False),
        sa.Column("schedule", sa.Text(), nullable=False),
        sa.Column("timezone", sa.String(64), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("dst_gap", sa.String(8), nullable=True),
        sa.Column("dst_fold", sa.String(8), nullable=True),
        sa.Column("target", sa.JSON(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=True),
        sa.Column("timeout_s", sa.Float(), nullable=False),
        sa.Column("retry", sa.JSON(), nullable=False),
        sa.Column("misfire", sa.JSON(), nullable=False),
        sa.Column("overlap", sa.String(16), nullable=False),
        _instant("start_at", nullable=True),
        _instant("end_at", nullable=True),
        sa.Column("paused", sa.Boolean(), nullable=False),
        sa.Column("pause_note", sa.Text(), nullable=True),
        _instant("paused_at", nullable=True),
        sa.Column("queue", sa.String(200), nullable=False),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        _instant("created_at", nullable=False),
        _instant("updated_at", nullable=False),
        _instant("next_run_at", nullable=True),
        _instant("deleted_at", nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_jobs"),
    )
    live = sa.column("deleted_at").is_(None)
    due = sa.and_(sa.column("deleted_at").is_(None), sa.column("paused") == sa.false())
    op.create_index(
        "uq_jobs_team_name_live",
        "jobs",
        ["team", "name"],
        unique=True,
        sqlite_where=live,
        postgresql_where=live,
    )
    op.create_index("ix_jobs_due", "jobs", ["shard", "next_run_at"], sqlite_where=due, postgresql_where=due)
    op.create_index("ix_jobs_due_at", "jobs", ["next_run_at"], sqlite_where=due, postgresql_where=due)

    op.create_table(
        "job_labels",
        _id("job_id", nullable=False),
        sa.Column("key", sa.String(200), nullable=False),
        sa.Column("value", sa.String(200), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name="fk_job_labels_job_id_jobs", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", "key", "value", name="pk_job_labels"),
    )
    op.create_index("ix_job_labels_key_value", "job_labels", ["key", "value"])

    op.create_table(
        "runs",
        _id(nullable=False),
        _id("job_id", nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        _instant("slot", nullable=False),
        sa.Column("dedup_key", sa.String(300), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("queue", sa.String(200), nullable=False),
        sa.Column("job_version", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=True),
        sa.Column("has_payload", sa.Boolean(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("lost_attempts", sa.Integer(), nullable=False),
        sa.Column("idempotency_key", sa.String(200), nullable=True),
        _instant("created_at", nullable=False),
        _instant("queued_at", nullable=True),
        _instant("started_at", nullable=True),
        _instant("finished_at", nullable=True),
        _instant("next_attempt_at", nullable=True),
        sa.Column("lease_owner", sa.String(200), nullable=True),
        _instant("lease_expires_at", nullable=True),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_runs_job_id_jobs"),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
        sa.UniqueConstraint("job_id", "dedup_key", name="uq_runs_job_id_dedup_key"),
        sa.CheckConstraint(f"state IN ({_STATES})", name="ck_runs_state"),
        sa.CheckConstraint(f"kind IN ({_KINDS})", name="ck_runs_kind"),
    )
    op.create_index("ix_runs_state_next_attempt_at", "runs", ["state", "next_attempt_at"])
    op.create_index("ix_runs_job_id_slot", "runs", ["job_id", "slot"])
    op.create_index("ix_runs_slot_id", "runs", ["slot", "id"])
    running = sa.column("state") == sa.literal_column("'RUNNING'")
    op.create_index(
        "ix_runs_lease", "runs", ["lease_expires_at"], sqlite_where=running, postgresql_where=running
    )

    op.create_table(
        "attempts",
        _id("run_id", nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(200), nullable=False),
        _instant("started_at", nullable=False),
        _instant("finished_at", nullable=True),
        sa.Column("outcome", sa.String(16), nullable=True),
        sa.Column("status_code", sa.Integer(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("output", sa.Text(), nullable=True),
        sa.Column("retry_after_s", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_attempts_run_id_runs"),
        sa.PrimaryKeyConstraint("run_id", "number", name="pk_attempts"),
        sa.CheckConstraint(f"outcome IN ({_OUTCOMES})", name="ck_attempts_outcome"),
    )

    op.create_table(
        "run_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
            nullable=False,
        ),
        _id("run_id", nullable=False),
        _instant("at", nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("previous", sa.String(16), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("node", sa.String(200), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name="fk_run_events_run_id_runs"),
        sa.PrimaryKeyConstraint("id", name="pk_run_events"),
    )
    op.create_index("ix_run_events_run_id_id", "run_events", ["run_id", "id"])


def downgrade() -> None:
    for index, table in (
        ("ix_run_events_run_id_id", "run_events"),
        ("ix_runs_lease", "runs"),
        ("ix_runs_slot_id", "runs"),
        ("ix_runs_job_id_slot", "runs"),
        ("ix_runs_state_next_attempt_at", "runs"),
        ("ix_job_labels_key_value", "job_labels"),
        ("ix_jobs_due_at", "jobs"),
        ("ix_jobs_due", "jobs"),
        ("uq_jobs_team_name_live", "jobs"),
    ):
        op.drop_index(index, table_name=table)
    for table in ("run_events", "attempts", "runs", "job_labels", "jobs"):
        op.drop_table(table)
