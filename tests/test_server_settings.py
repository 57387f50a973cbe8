"""A node's settings may reach a log line or a traceback: their repr never shows a secret."""

from __future__ import annotations

from cronwheel.node.server import ServerSettings


def test_the_repr_hides_backend_passwords_keys_and_the_smtp_url() -> None:
    settings = ServerSettings(
        database_url="postgresql://cw:pg-pass-1@127.0.0.1:5432/cw",
        coordinator_url="etcd://root:etcd-pass-2@127.0.0.1:2379",
        queue_url="redis://:redis-pass-3@127.0.0.1:6379/0",
        secret_keys="key-material-4",
        smtp_url="smtp://mail:smtp-pass-5@127.0.0.1:25",
    )
    shown = repr(settings)
    for secret in ("pg-pass-1", "etcd-pass-2", "redis-pass-3", "key-material-4", "smtp-pass-5"):
        assert secret not in shown
    assert "postgresql://cw:***@127.0.0.1:5432/cw" in shown  # still says which backend
    assert "etcd://root:***@127.0.0.1:2379" in shown
    assert "port=8080" in shown
    assert "roles=('api', 'scheduler', 'worker')" in shown


def test_the_repr_of_the_embedded_defaults_is_as_written() -> None:
    assert "database_url='sqlite:///cronwheel.db'" in repr(ServerSettings())
    assert "coordinator_url=None" in repr(ServerSettings())
