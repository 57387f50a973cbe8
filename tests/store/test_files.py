"""The embedded store's files are their owner's alone: the database, its -wal and -shm, and the
server's lock file were created 0644 (the umask's mode), readable by every user of the machine,
command targets included."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from cronwheel.clock import ManualClock
from cronwheel.model import HttpTarget, Job
from cronwheel.node.server import _single_owner
from cronwheel.store.files import open_private, private_sqlite_files
from cronwheel.store.migrate import upgrade_database
from cronwheel.store.sql import open_store

from .support import START


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_a_new_database_and_its_companions_are_0600(tmp_path: Path) -> None:
    previous = os.umask(0o022)  # the usual one: left alone, it makes the files 0644
    database = tmp_path / "cronwheel.db"
    store = await open_store(f"sqlite:///{database}", clock=ManualClock(START))
    os.umask(previous)
    try:
        job = Job(id="", team="ops", name="n", schedule="0 3 * * *", target=HttpTarget("https://h.example/"))
        await store.create_job(job)
        files = sorted(path.name for path in tmp_path.iterdir())
        assert files == ["cronwheel.db", "cronwheel.db-shm", "cronwheel.db-wal"]
        assert {name: mode(tmp_path / name) for name in files} == dict.fromkeys(files, 0o600)
    finally:
        await store.close()


async def test_db_upgrade_creates_it_0600_too(tmp_path: Path) -> None:
    database = tmp_path / "upgraded.db"
    await upgrade_database(f"sqlite:///{database}")
    assert mode(database) == 0o600


def test_files_of_an_earlier_version_are_narrowed(tmp_path: Path) -> None:
    database = tmp_path / "old.db"
    for path in (database, tmp_path / "old.db-wal", tmp_path / "old.db-shm"):
        path.write_bytes(b"")
        path.chmod(0o644)
    private_sqlite_files(database)
    assert [mode(path) for path in sorted(tmp_path.iterdir())] == [0o600, 0o600, 0o600]


def test_the_lock_file_is_0600(tmp_path: Path) -> None:
    database = tmp_path / "cronwheel.db"
    with _single_owner(f"sqlite:///{database}"):
        assert mode(tmp_path / "cronwheel.db.lock") == 0o600
    old = tmp_path / "other.lock"
    old.write_text("")
    old.chmod(0o644)
    os.close(open_private(old))
    assert mode(old) == 0o600


def test_a_missing_directory_is_left_to_sqlite(tmp_path: Path) -> None:
    private_sqlite_files(tmp_path / "missing" / "cronwheel.db")
    assert not (tmp_path / "missing").exists()
