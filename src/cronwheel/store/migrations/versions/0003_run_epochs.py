"""The fencing epoch each scheduled run was recorded under: ``runs.epoch``.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29

A cluster scheduler records a run only while the store holds its shard at the scheduler's epoch
(``shard_epochs``); the run now keeps that epoch, so that an audit (the chaos suite's checker,
an operator) can verify from the store alone that no write from a stale epoch was accepted: per
shard, in insertion order, epochs never decrease. NULL for embedded, manual and skipped-by-API
runs. A frozen snapshot: later changes get new revisions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("epoch", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("epoch")
