"""The coordinator's tables on PostgreSQL (``cronwheel.coordinator.postgres``).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07

``coordination_members`` (one row per node name: its roles, its current incarnation and lease),
``coordination_duties`` (the leader and watchdog leases; the leader's row carries the shard
assignment) and ``coordination_shards`` (one row per shard: holder, fencing epoch, lease). Every
lease expiry is epoch microseconds by the database's clock. SQLite gets the tables too (the
store's schema is one on both databases); nothing uses them there. A frozen snapshot: later
changes get new revisions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "coordination_members",
        sa.Column("node", sa.String(200), nullable=False),
        sa.Column("incarnation", sa.BigInteger(), nullable=False),
        sa.Column("roles", sa.Text(), nullable=False),
        sa.Column("metrics_url", sa.Text(), nullable=True),
        sa.Column("since", sa.BigInteger(), nullable=True),
        sa.Column("joined_at", sa.BigInteger(), nullable=False),
        sa.Column("renewed_at", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("node", name="pk_coordination_members"),
    )
    op.create_table(
        "coordination_duties",
        sa.Column("duty", sa.String(32), nullable=False),
        sa.Column("node", sa.String(200), nullable=True),
        sa.Column("incarnation", sa.BigInteger(), nullable=True),
        sa.Column("expires_at", sa.BigInteger(), nullable=True),
        sa.Column("assignment", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("duty", name="pk_coordination_duties"),
    )
    op.create_table(
        "coordination_shards",
        sa.Column("shard", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("node", sa.String(200), nullable=True),
        sa.Column("incarnation", sa.BigInteger(), nullable=True),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("shard", name="pk_coordination_shards"),
    )


def downgrade() -> None:
    op.drop_table("coordination_shards")
    op.drop_table("coordination_duties")
    op.drop_table("coordination_members")
