"""Notifications: rules, the inbox of terminal runs, each job's notification state, the outbox.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01

``notification_rules`` holds a team's default rules and jobs' own (JSON, as
``cronwheel.notifications.rules.rules_to_json`` writes them); ``notification_inbox`` the runs that
just reached SUCCESS or FAILED (written in the same transaction); ``notification_health`` each
job's state per aspect (outcome, lateness, missed slots); ``notification_outbox`` one row per
notification and channel, until delivered. A frozen snapshot: later changes get new revisions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "notification_rules",
        sa.Column("scope", sa.String(250), nullable=False),
        sa.Column("team", sa.String(200), nullable=False),
        sa.Column("job_id", sa.String(36), nullable=True),
        sa.Column("rules", sa.JSON(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("scope", name="pk_notification_rules"),
    )
    op.create_index("ix_notification_rules_team", "notification_rules", ["team"])
    op.create_table(
        "notification_inbox",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("run_id", sa.String(36), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_notification_inbox"),
    )
    op.create_table(
        "notification_health",
        sa.Column("job_id", sa.String(36), nullable=False),
        sa.Column("aspect", sa.String(40), nullable=False),
        sa.Column("value", sa.String(16), nullable=False),
        sa.Column("since", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("job_id", "aspect", name="pk_notification_health"),
    )
    op.create_table(
        "notification_outbox",
        sa.Column("id", sa.String(120), nullable=False),
        sa.Column("notification_id", sa.String(64), nullable=False),
        sa.Column("team", sa.String(200), nullable=False),
        sa.Column("job_id", sa.String(36), nullable=True),
        sa.Column("event", sa.String(16), nullable=False),
        sa.Column("channel", sa.JSON(), nullable=False),
        sa.Column("message", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.BigInteger(), nullable=True),
        sa.Column("finished_at", sa.BigInteger(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_notification_outbox"),
    )
    op.create_index(
        "ix_notification_outbox_state_next_attempt_at", "notification_outbox", ["state", "next_attempt_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_notification_outbox_state_next_attempt_at", table_name="notification_outbox")
    op.drop_table("notification_outbox")
    op.drop_table("notification_health")
    op.drop_table("notification_inbox")
    op.drop_index("ix_notification_rules_team", table_name="notification_rules")
    op.drop_table("notification_rules")
