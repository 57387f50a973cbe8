"""The audit log: the ``audit_log`` table.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01

One row per entry (``cronwheel.audit.AuditEntry``): when, which team's, the action, the actor
(kind, id, name, client address), the target (kind, id, name), the outcome (and the HTTP status
and reason of a refusal), and JSON snapshots before and after (never a credential). Appended to,
never updated. A frozen snapshot: later changes get new revisions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),  # epoch microseconds (Instant)
        sa.Column("team", sa.String(200), nullable=True),
        sa.Column("action", sa.String(40), nullable=False),
        sa.Column("actor_kind", sa.String(20), nullable=False),
        sa.Column("actor_id", sa.String(200), nullable=True),
        sa.Column("actor_name", sa.String(200), nullable=True),
        sa.Column("client", sa.String(100), nullable=True),
        sa.Column("target_kind", sa.String(20), nullable=True),
        sa.Column("target_id", sa.String(300), nullable=True),
        sa.Column("target_name", sa.String(300), nullable=True),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("status", sa.Integer(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.Column("before", sa.JSON(), nullable=True),
        sa.Column("after", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_audit_log"),
    )
    op.create_index("ix_audit_log_at", "audit_log", ["at", "id"])
    op.create_index("ix_audit_log_team_at", "audit_log", ["team", "at", "id"])


def downgrade() -> None:
    op.drop_index("ix_audit_log_team_at", table_name="audit_log")
    op.drop_index("ix_audit_log_at", table_name="audit_log")
    op.drop_table("audit_log")
