"""An attempt's output while it runs, and the headers an HTTP target answered with:
``attempts.output_at``, ``attempts.response_headers``.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-07

While an attempt runs, the worker holding its run's lease writes the output so far into
``attempts.output`` (at most once a second, its last 64 KiB, secrets redacted) and the instant of
that write into ``attempts.output_at``; the attempt's final record replaces both.
``attempts.response_headers`` holds ``[[name, value], ...]``: the headers of the HTTP answer, in
order, every credential's value ``[redacted]``, bounded like ``request_headers``; NULL: no answer
was read. A frozen snapshot: later changes get new revisions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        # epoch microseconds (Instant)
        batch.add_column(sa.Column("output_at", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("response_headers", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        batch.drop_column("response_headers")
        batch.drop_column("output_at")
