"""The backend URLs select a mode (``cronwheel.cluster.mode``); a node refuses the ones that
cannot run before it touches any backend."""

from __future__ import annotations

import pytest

from cronwheel.cluster.mode import Mode, mode_of
from cronwheel.errors import PermanentError
from cronwheel.node.server import ServerSettings

PG = "postgresql://cw@127.0.0.1:5432/cw"
ETCD = "etcd://127.0.0.1:2379"
REDIS = "redis://127.0.0.1:6379/0"


@pytest.mark.parametrize(
    ("database", "coordinator", "queue", "name", "parts"),
    [
        ("sqlite:///cw.db", None, None, "embedded", ("sqlite", "local", "memory")),
        (PG, None, None, "postgresql", ("postgresql", "postgresql", "postgresql")),
        (PG, ETCD, REDIS, "postgresql+etcd+redis", ("postgresql", "etcd", "redis")),
        (PG, ETCD, None, "postgresql+etcd", ("postgresql", "etcd", "postgresql")),
        (PG, None, REDIS, "postgresql+redis", ("postgresql", "postgresql", "redis")),
        ("postgres://cw@h/cw", None, None, "postgresql", ("postgresql", "postgresql", "postgresql")),
    ],
)
def test_the_urls_name_the_mode(
    database: str, coordinator: str | None, queue: str | None, name: str, parts: tuple[str, str, str]
) -> None:
    mode = mode_of(database, coordinator, queue)
    assert (mode.name, (mode.store, mode.coordinator, mode.queue), mode.valid) == (name, parts, True)
    assert mode.as_dict() == {"name": name, "store": parts[0], "coordinator": parts[1], "queue": parts[2]}


@pytest.mark.parametrize(("coordinator", "queue"), [(ETCD, None), (None, REDIS), (ETCD, REDIS)])
def test_a_cluster_backend_beside_sqlite_is_refused(coordinator: str | None, queue: str | None) -> None:
    assert not mode_of("sqlite:///cw.db", coordinator, queue).valid
    settings = ServerSettings(database_url="sqlite:///cw.db", coordinator_url=coordinator, queue_url=queue)
    with pytest.raises(PermanentError, match="keeps its state in PostgreSQL"):
        settings.check()


def test_postgresql_alone_runs_any_role_in_its_own_process() -> None:
    for roles in (("api",), ("scheduler",), ("worker",)):
        settings = ServerSettings(database_url=PG, roles=roles)
        settings.check()  # no etcd, no Redis: a cluster all the same
        assert not settings.embedded
        assert settings.mode == Mode("postgresql", "postgresql", "postgresql")


def test_the_embedded_mode_still_needs_every_role_in_one_process() -> None:
    with pytest.raises(PermanentError, match="need every role in one process"):
        ServerSettings(roles=("scheduler",)).check()
