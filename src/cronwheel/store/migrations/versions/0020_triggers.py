"""The ``triggers`` table: the trigger queue on PostgreSQL (``cronwheel.queue.postgres``).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07

One row per trigger not yet acknowledged: its queue name, run, job and slot, when it is due
(``available_at``), how many times it was handed out (``deliveries``) and, while handed out, until
when and to whom (``claimed_until``, ``consumer``). Receivers read by (queue, available_at).
On PostgreSQL every row is updated once per hand-out and deleted soon after: a fifth of each page
kept free makes the claim (no indexed column changes) a heap-only update, and autovacuum visits
the table after a much smaller share of dead rows than the default fifth. SQLite gets the table
too (the store's schema is one on both databases); nothing uses it there. A frozen snapshot:
later changes get new revisions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "triggers",
        sa.Column("id", sa.BigInteger(), autoincrement=True, nullable=False),
        sa.Column("queue", sa.String(200), nullable=False),
        sa.Column("run_id", sa.String(36), nullable=False),
        sa.Column("job_id", sa.String(36), nullable=False),
        sa.Column("slot", sa.BigInteger(), nullable=True),
        sa.Column("available_at", sa.BigInteger(), nullable=False),
        sa.Column("deliveries", sa.Integer(), nullable=False),
        sa.Column("claimed_until", sa.BigInteger(), nullable=True),
        sa.Column("consumer", sa.String(200), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_triggers"),
        postgresql_with={"fillfactor": 80, "autovacuum_vacuum_scale_factor": 0.01},
    )
    op.create_index("ix_triggers_queue_available_at", "triggers", ["queue", "available_at"])


def downgrade() -> None:
    op.drop_index("ix_triggers_queue_available_at", table_name="triggers")
    op.drop_table("triggers")
