"""The embedded store's files on disk are their owner's alone (mode 0600).

The SQLite database holds every team's jobs, their headers and environments, and tokens; its
``-wal`` and ``-shm`` files hold recent pages of it. They were created with the process' umask
(0644 with the usual 022): readable by every user of the machine, command targets included.

SQLite creates ``-wal`` and ``-shm`` with the mode of the database file (``unixOpen`` copies it),
so creating the database itself 0600, before SQLite does, is enough for new files; files an
earlier version created are narrowed to 0600 when the store opens them. The embedded server's
lock file (``<database>.lock``) is created the same way. Files of another owner are left alone
(``chmod`` would fail): the process that opens them is then not their owner, which the operator
chose.
"""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE = 0o600
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def private_file(path: str | Path) -> None:
    """Create ``path`` 0600 if it is missing; narrow it to 0600 if it is more open and ours. A
    directory that is missing or not writable is left for SQLite to report as it always did."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE)
    except FileExistsError:
        _narrow(Path(path))
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        return
    else:
        os.close(fd)


def private_sqlite_files(database: str | Path) -> None:
    """The database (created empty if missing: SQLite takes an empty file as an empty database)
    and whichever of its companion files exist, 0600."""
    private_file(database)
    for suffix in SQLITE_COMPANIONS:
        _narrow(Path(f"{database}{suffix}"))


def open_private(path: str | Path) -> int:
    """An append-mode descriptor on ``path``, created 0600 (the lock file)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, PRIVATE)
    status = os.fstat(fd)
    if status.st_mode & 0o077 and status.st_uid == os.geteuid():
        os.fchmod(fd, PRIVATE)
    return fd


def _narrow(path: Path) -> None:
    try:
        status = path.stat()
    except FileNotFoundError:
        return
    if status.st_mode & 0o077 and status.st_uid == os.geteuid():
        path.chmod(PRIVATE)
