"""Backfills: the ``backfills`` table, and ``backfill`` among the kinds of ``runs``.

Revision ID: 0016
Revises: 0014
Create Date: 2026-12-07

A backfill records a run for every past slot of a job in a range that has none; ``backfills``
holds each request and its progress (``cursor_at``: the earliest instant whose slots remain, NULL
once through; ``created`` and ``existing`` counts), moved in the transaction that records each
batch of runs. Runs of kind ``backfill`` take their slot's (job, slot) key, as scheduled runs do.

The kind is added to ``ck_runs_kind``. PostgreSQL drops and adds the constraint. SQLite cannot
alter a constraint; copying ``runs`` (a batch) would rewrite the whole history and break the
foreign keys of ``run_events`` and ``attempts``, so the table's stored definition is rewritten in
place, the procedure SQLite documents for loosening a CHECK (``writable_schema``, then a new
``schema_version`` so that every connection reads the definition again): every existing row
satisfies the wider constraint. A frozen snapshot: later changes get new revisions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0014"
branch_labels: str | None = None
depends_on: str | None = None

_OLD_KINDS = "kind IN ('scheduled', 'manual')"
_NEW_KINDS = "kind IN ('scheduled', 'manual', 'backfill')"
_RUNNING = sa.column("state") == sa.literal_column("'running'")


def upgrade() -> None:
    op.create_table(
        "backfills",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("job_id", sa.String(36), nullable=False),
        sa.Column("start_at", sa.BigInteger(), nullable=False),
        sa.Column("end_at", sa.BigInteger(), nullable=False),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("created", sa.Integer(), nullable=False),
        sa.Column("existing", sa.Integer(), nullable=False),
        sa.Column("cursor_at", sa.BigInteger(), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("state IN ('running', 'done', 'cancelled')", name="ck_backfills_state"),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_backfills_job_id_jobs"),
        sa.PrimaryKeyConstraint("id", name="pk_backfills"),
    )
    op.create_index("ix_backfills_job_id_created_at", "backfills", ["job_id", "created_at"])
    op.create_index(
        "ix_backfills_running", "backfills", ["created_at"], sqlite_where=_RUNNING, postgresql_where=_RUNNING
    )
    _run_kinds(_OLD_KINDS, _NEW_KINDS)


def downgrade() -> None:
    op.execute("DELETE FROM run_events WHERE run_id IN (SELECT id FROM runs WHERE kind = 'backfill')")
    op.execute("DELETE FROM attempts WHERE run_id IN (SELECT id FROM runs WHERE kind = 'backfill')")
    op.execute("DELETE FROM runs WHERE kind = 'backfill'")
    _run_kinds(_NEW_KINDS, _OLD_KINDS)
    op.drop_index("ix_backfills_running", table_name="backfills")
    op.drop_index("ix_backfills_job_id_created_at", table_name="backfills")
    op.drop_table("backfills")


def _run_kinds(old: str, new: str) -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.drop_constraint("ck_runs_kind", "runs", type_="check")
        op.create_check_constraint("ck_runs_kind", "runs", new)
        return
    bind = op.get_bind()
    version = bind.exec_driver_sql("PRAGMA schema_version").scalar_one()
    bind.exec_driver_sql("PRAGMA writable_schema=ON")
    changed = bind.execute(
        sa.text(
            "UPDATE sqlite_master SET sql = replace(sql, :old, :new) "
            "WHERE type = 'table' AND name = 'runs' AND instr(sql, :old) > 0"
        ),
        {"old": old, "new": new},
    ).rowcount
    bind.exec_driver_sql(f"PRAGMA schema_version={int(version) + 1}")
    bind.exec_driver_sql("PRAGMA writable_schema=OFF")
    if changed != 1:
        raise RuntimeError(f"runs' CHECK on kind is not {old!r}: not migrated by hand, left alone")
