"""Shard fencing epochs: the ``shard_epochs`` table.

Revision ID: 0002
Revises: 0001
Create Date: 2026-03-01

One row per shard that a scheduler has claimed: the newest lease epoch (the coordinator's
fencing token, an etcd revision in a cluster), the node that claimed it, and when. Firing writes
that carry an older epoch are refused (``SqlStore.fire(..., epochs=...)``). A frozen snapshot:
later changes get new revisions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "shard_epochs",
        sa.Column("shard", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("node", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),  # epoch microseconds (Instant)
        sa.PrimaryKeyConstraint("shard", name="pk_shard_epochs"),
    )


def downgrade() -> None:
    op.drop_table("shard_epochs")
