"""The headers an HTTP attempt sent: ``attempts.request_headers``.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-15

``attempts.request_headers`` holds ``[[name, value], ...]``: the headers of the request an HTTP
attempt sent, in the order sent, every credential's value ``[redacted]``
(:func:`cronwheel.redaction.kept_headers`: authorization, signature, cookies, values from team
secrets), bounded to 64 headers and 16 KiB. NULL: no HTTP request was sent (another target kind,
a request refused before sending, or an attempt recorded before this revision). A frozen
snapshot: later changes get new revisions.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        batch.add_column(sa.Column("request_headers", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("attempts") as batch:
        batch.drop_column("request_headers")
