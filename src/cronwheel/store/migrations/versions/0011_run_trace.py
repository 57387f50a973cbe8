"""The trace context of a run: ``runs.traceparent``.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-08

``runs.traceparent`` holds the W3C ``traceparent`` of the run's trace (its fire span as the
parent) when the node that recorded the run had tracing on; NULL otherwise. A worker reads it
with the run it claims, so its attempt spans join that trace wherever it runs. A frozen
snapshot: later changes get new revisions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("traceparent", sa.String(55), nullable=True))


def downgrade() -> None:
    # not a batch: a batch copies ``runs`` on SQLite, and dropping the old copy breaks the foreign
    # keys of its history (run_events, attempts). SQLite drops a plain column itself (3.35+).
    op.drop_column("runs", "traceparent")
