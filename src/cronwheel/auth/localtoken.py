"""The embedded server's admin token file: where it is kept, how it is written, how the CLI finds it
(:mod:`cronwheel.node.admin_token` makes the token).

``cronwheel server`` over SQLite makes an admin token of every team on its first start and writes
it to ``<database>.token`` (``cronwheel.db.token`` beside ``cronwheel.db``), readable and writable
by its owner only (0600), so that the quickstart stays one command and the CLI on the same machine,
run by the same user, authenticates by itself. The token is never printed or logged: the server
says where the file is. A file whose token no longer works (revoked, expired, or from another
database) is replaced at the next start.

So that the CLI finds the file from any directory, a server listening on a fixed loopback port also
leaves a pointer: ``$XDG_STATE_HOME/cronwheel/local/<host>_<port>`` (default
``~/.local/state/cronwheel/local/...``) holding the file's absolute path (not the token).

What a local user with the same account can read, they could read in the database anyway; other
accounts cannot read the file.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

TOKEN_SUFFIX = ".token"  # noqa: S105 - a file name suffix, not a secret
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


def sqlite_path(database_url: str) -> str | None:
    """The file of a SQLite URL (None: not SQLite, or in memory)."""
    for prefix in ("sqlite+aiosqlite:///", "sqlite:///"):
        if database_url.startswith(prefix):
            rest = database_url[len(prefix) :].split("?", 1)[0]
            return None if rest in ("", ":memory:") else rest
    return None


def token_file(database_url: str) -> Path | None:
    """Where the embedded server keeps its admin token for ``database_url`` (absolute)."""
    path = sqlite_path(database_url)
    return None if path is None else Path(path + TOKEN_SUFFIX).absolute()


def state_dir(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".local" / "state")
    return Path(base) / "cronwheel" / "local"


def pointer_file(url: str, env: Mapping[str, str]) -> Path | None:
    """The pointer a server at ``url`` leaves (None: not a fixed loopback address)."""
    parts = urlsplit(url)
    host, port = parts.hostname, parts.port
    if host not in LOOPBACK or not port:
        return None
    return state_dir(env) / f"{host.replace(':', '-')}_{port}"


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` as a new file of mode 0600, atomically (never a moment when the
    old file is gone and the new one half written, nor one readable by others)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def read_token(path: Path) -> str | None:
    """The token a file holds (None: no such file, or unreadable)."""
    try:
        text = path.read_text().strip()
    except (OSError, UnicodeError):
        return None
    return text or None


def find_local_token(url: str, env: Mapping[str, str], cwd: Path) -> tuple[str, Path] | None:
    """The token of the embedded server at the loopback ``url``, and the file it came from: the
    file of ``CRONWHEEL_DATABASE_URL``, the one the server's pointer names, or
    ``./cronwheel.db.token`` (None: not loopback, or no readable file)."""
    if urlsplit(url).hostname not in LOOPBACK:
        return None
    candidates: list[Path] = []
    database = token_file(env.get("CRONWHEEL_DATABASE_URL", ""))
    if database is not None:
        candidates.append(database)
    pointer = pointer_file(url, env)
    if pointer is not None and (named := read_token(pointer)) is not None:
        candidates.append(Path(named))
    candidates.append(cwd / f"cronwheel.db{TOKEN_SUFFIX}")
    for candidate in candidates:
        token = read_token(candidate)
        if token is not None:
            return token, candidate
    return None
