"""Calendars: the ``calendars`` table, and the calendar columns of ``jobs``.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07

``calendars`` holds a team's named calendars of closed days (``spec``: dates, ranges, weekdays,
holidays of a country). A job lists calendars by name (``jobs.calendars``), says where an
excluded slot's run goes (``jobs.calendar_shift``: none, next, previous) and carries the union of
its calendars' specs (``jobs.calendar_spec``, NULL without calendars), which the store rewrites
with every calendar edit so that schedulers read nothing else. Existing jobs list none. A frozen
snapshot: later changes get new revisions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "calendars",
        sa.Column("team", sa.String(200), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("team", "name", name="pk_calendars"),
    )
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("calendars", sa.JSON(), nullable=False, server_default="[]"))
        batch.add_column(sa.Column("calendar_shift", sa.String(8), nullable=False, server_default="none"))
        batch.add_column(sa.Column("calendar_spec", sa.JSON(), nullable=True))


def downgrade() -> None:
    # ALTER TABLE ... DROP COLUMN on both databases (SQLite 3.35+): a batch would copy ``jobs``,
    # which the foreign keys of ``runs`` forbid once jobs have runs
    for column in ("calendar_spec", "calendar_shift", "calendars"):
        op.execute(f"ALTER TABLE jobs DROP COLUMN {column}")
    op.drop_table("calendars")
