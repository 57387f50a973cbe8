"""API tokens: the ``api_tokens`` table.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-14

One row per API token (``cronwheel.auth.tokens``): its public id, name, team (NULL: every team),
scopes, the SHA-256 digest of the token (the token itself is shown once and never stored), when it
was made and by which token, its expiry, when it was last used (written at most once a minute) and
when it was revoked. A frozen snapshot: later changes get new revisions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("team", sa.String(200), nullable=True),
        sa.Column("scopes", sa.JSON(), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),  # epoch microseconds (Instant)
        sa.Column("created_by", sa.String(36), nullable=True),
        sa.Column("expires_at", sa.BigInteger(), nullable=True),
        sa.Column("last_used_at", sa.BigInteger(), nullable=True),
        sa.Column("revoked_at", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_api_tokens"),
    )
    op.create_index("ix_api_tokens_team_created_at", "api_tokens", ["team", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_api_tokens_team_created_at", table_name="api_tokens")
    op.drop_table("api_tokens")
