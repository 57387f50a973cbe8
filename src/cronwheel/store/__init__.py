"""The metadata store port: the truth about jobs, runs and attempts.

One ``Protocol`` per role (:mod:`cronwheel.store.port`), their union :class:`Store`, with the
contracts in the docstrings; ``tests/store`` runs one contract suite against every backend
(SQLite and PostgreSQL). Backends are named by their
technology: :class:`cronwheel.store.sql.SqlStore` serves SQLite and PostgreSQL through SQLAlchemy
Core with one Alembic schema; :class:`cronwheel.store.change_listener.PostgresChangeListener` carries
job-change notifications between processes on PostgreSQL.
"""

from cronwheel.store.port import JobQuery, Page, RunChange, RunQuery, RunSample, Store, TokenQuery

__all__ = [
    "JobQuery",
    "Page",
    "RunChange",
    "RunQuery",
    "RunSample",
    "Store",
    "TokenQuery",
]
