"""The due jobs in the order the scheduler pages them: ``ix_jobs_due_at`` on (next_run_at, id).

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06

A scheduler reads its due jobs a page at a time, ordered by (next_run_at, id), each page strictly
after the last one's (next_run_at, id). On ``next_run_at`` alone the index gives that order up to
ties, and thousands of jobs share a second (every ``0 * * * *`` job): PostgreSQL read the whole
second's jobs and sorted them for each page. Measured in ``benchmarks/bench_million.py`` with a
million jobs due within an hour: 12,261 rows read for a page of 2,000, 0.25-0.78 s a page. With
the id in the index the page is an index range that stops at the limit. The index keeps its name
and its WHERE (live, unpaused); the queries that used it for ``next_run_at`` alone still can. A
frozen snapshot: later changes get new revisions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | None = None
depends_on: str | None = None

DUE = sa.and_(sa.column("deleted_at").is_(None), sa.column("paused") == sa.false())


def upgrade() -> None:
    op.drop_index("ix_jobs_due_at", table_name="jobs")
    op.create_index("ix_jobs_due_at", "jobs", ["next_run_at", "id"], sqlite_where=DUE, postgresql_where=DUE)


def downgrade() -> None:
    op.drop_index("ix_jobs_due_at", table_name="jobs")
    op.create_index("ix_jobs_due_at", "jobs", ["next_run_at"], sqlite_where=DUE, postgresql_where=DUE)
