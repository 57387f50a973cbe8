"""Team secrets: the ``secrets`` table.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

One row per (team, name): the value sealed with AES-256-GCM (``cronwheel.secrets.crypto``; the
database never holds it in clear), the id of the key that sealed it, and when the secret was
created and last set. A frozen snapshot: later changes get new revisions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "secrets",
        sa.Column("team", sa.String(200), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("key_id", sa.String(64), nullable=False),
        sa.Column("value", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),  # epoch microseconds (Instant)
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("team", "name", name="pk_secrets"),
    )


def downgrade() -> None:
    op.drop_table("secrets")
