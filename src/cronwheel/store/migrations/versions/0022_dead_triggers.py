"""The ``dead_triggers`` table: dead letters of the trigger queue on PostgreSQL.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-07

One row per trigger that ``cronwheel.queue.postgres`` handed out ``max_deliveries`` times without
an acknowledgement and then took out of ``triggers`` instead of handing it out again: its queue
name, the ``triggers`` row it was (``trigger_id``), its run, job and slot, how many times it was
handed out and when it was buried (``dead_at``, by the database's clock). Kept for inspection,
the newest ``dead_letter_max`` per queue; read and trimmed by (queue, id). SQLite gets the table
too (the store's schema is one on both databases); nothing uses it there. A frozen snapshot:
later changes get new revisions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "dead_triggers",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("queue", sa.String(200), nullable=False),
        sa.Column("trigger_id", sa.BigInteger(), nullable=False),
        sa.Column("run_id", sa.String(36), nullable=False),
        sa.Column("job_id", sa.String(36), nullable=False),
        sa.Column("slot", sa.BigInteger(), nullable=True),
        sa.Column("deliveries", sa.Integer(), nullable=False),
        sa.Column("dead_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_dead_triggers"),
    )
    op.create_index("ix_dead_triggers_queue_id", "dead_triggers", ["queue", "id"])


def downgrade() -> None:
    op.drop_index("ix_dead_triggers_queue_id", table_name="dead_triggers")
    op.drop_table("dead_triggers")
