"""Label filters page by job id: ``ix_job_labels_key_value`` becomes (key, value, job_id).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29

``list_jobs`` filters by label with ``EXISTS (job_labels: job_id = jobs.id AND key AND value)``
and returns jobs in id order, a page at a time. With only (key, value), PostgreSQL must either
fetch every job of the label and sort them, or walk ``pk_job_labels`` (job_id, key, value) in id
order and test each entry; it walks when it expects many matches. For a value it has no
statistics for under a common key (a new ``app=...`` on a handful of jobs, or none), that walk
reads the whole index. Measured with ``benchmarks/bench_million.py`` (1,000,000 jobs, 2,000,000
label rows, PostgreSQL 15, 2 cores): the query took 124-161 ms (EXPLAIN ANALYZE) and
``GET /v1/jobs?label=app=<a 0.01% app>`` p50 77 ms, p99 129 ms. With job_id last in the index the
entries of one (key, value) come in id order, so the page is read in order and the walk stops
after it: 0.1-3.8 ms, and the API's p99 15-35 ms. The new index answers everything the old one
did (its prefix), so the old one is dropped.
A frozen snapshot: later changes get new revisions.
"""

from __future__ import annotations

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_index("ix_job_labels_key_value_job_id", "job_labels", ["key", "value", "job_id"])
    op.drop_index("ix_job_labels_key_value", table_name="job_labels")


def downgrade() -> None:
    op.create_index("ix_job_labels_key_value", "job_labels", ["key", "value"])
    op.drop_index("ix_job_labels_key_value_job_id", table_name="job_labels")
