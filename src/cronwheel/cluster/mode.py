"""Which technology holds each part of a node's state, chosen by the backend URLs it is given.

| store (``--database-url``) | coordinator (``--coordinator-url``) | queue (``--queue-url``) | mode |
|---|---|---|---|
| SQLite | unset: in this process | unset: in this process | ``embedded`` |
| PostgreSQL | unset: PostgreSQL rows | unset: PostgreSQL rows | ``postgresql`` |
| PostgreSQL | ``etcd://...`` | ``redis://...`` | ``postgresql+etcd+redis`` |
| PostgreSQL | ``etcd://...`` | unset | ``postgresql+etcd`` |
| PostgreSQL | unset | ``redis://...`` | ``postgresql+redis`` |

A coordinator or queue URL needs a PostgreSQL store: the embedded SQLite store serves one process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

StoreKind = Literal["sqlite", "postgresql"]
CoordinatorKind = Literal["local", "postgresql", "etcd"]
QueueKind = Literal["memory", "postgresql", "redis"]


def is_postgres(url: str) -> bool:
    return urlsplit(url).scheme.startswith(("postgres", "postgresql"))


@dataclass(frozen=True, slots=True)
class Mode:
    """The technologies of one node's store, coordinator and queue."""

    store: StoreKind
    coordinator: CoordinatorKind
    queue: QueueKind

    @property
    def name(self) -> str:
        """``embedded``, or the distinct technologies a cluster runs on, the store's first."""
        if self.coordinator == "local":
            return "embedded"
        return "+".join(dict.fromkeys((self.store, self.coordinator, self.queue)))

    @property
    def embedded(self) -> bool:
        return self.coordinator == "local"

    @property
    def valid(self) -> bool:
        """A cluster (any coordinator but the local one) keeps its state in PostgreSQL."""
        in_process = self.coordinator == "local" and self.queue == "memory"
        return in_process if self.store == "sqlite" else self.coordinator != "local"

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "store": self.store, "coordinator": self.coordinator, "queue": self.queue}


def mode_of(database_url: str, coordinator_url: str | None, queue_url: str | None) -> Mode:
    """The mode the three URLs select (see the module's table); :attr:`Mode.valid` says whether
    it can run."""
    if not is_postgres(database_url):
        return Mode("sqlite", "etcd" if coordinator_url else "local", "redis" if queue_url else "memory")
    return Mode(
        "postgresql", "etcd" if coordinator_url else "postgresql", "redis" if queue_url else "postgresql"
    )
