"""Command targets run as the configured unprivileged user and group, under resource limits, and
start outside the worker's directory (``worker/executors/isolation.py``). Before, a command ran
as the worker's user (root here) with no limits in the worker's working directory, and a
``grep`` job could read the database holding every team's secrets.

These tests need root, as the suite runs on CI: only root can start a program as another user."""

from __future__ import annotations

import os
import pwd
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cronwheel.errors import InvalidInputError
from cronwheel.model import AttemptResult, CommandTarget, Outcome
from cronwheel.node.server import ServerSettings
from cronwheel.worker.executors import AttemptContext, CommandExecutor, WorkerSettings
from cronwheel.worker.executors.isolation import AUTO, CommandIsolation, CommandLimits, default_user

NOBODY = pwd.getpwnam("nobody")
SECRET = "team-billing-token-9f2c"


def ctx(timeout_s: float = 10.0) -> AttemptContext:
    now = datetime.now(UTC)
    return AttemptContext("run-1", "job-1", "n", "data", now, attempt=1, timeout_s=timeout_s)


async def run(argv: tuple[str, ...], isolation: CommandIsolation, **target: str) -> AttemptResult:
    settings = WorkerSettings(allow_commands=True, output_limit=8192, isolation=isolation)
    executor = CommandExecutor(settings)
    try:
        return await executor.execute(CommandTarget(argv=argv, **target), ctx())  # type: ignore[arg-type]
    finally:
        await executor.close()


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory every user may enter (tmp_path's parents are root's alone), with a file only
    root may read, as the database is."""
    path = Path(tempfile.mkdtemp(prefix="cw-isolation-"))
    path.chmod(0o777)
    secret = path / "cronwheel.db"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    try:
        yield path
    finally:
        for child in path.iterdir():
            child.unlink()
        path.rmdir()


async def test_runs_as_the_command_user_and_group(shared: Path) -> None:
    script = "id -u; id -g; id -G; echo $HOME $USER; pwd; cat cronwheel.db"
    result = await run(("sh", "-c", script), CommandIsolation(user="nobody"), cwd=str(shared))
    assert result.outcome is Outcome.FAILURE  # cat was refused
    lines = (result.output or "").splitlines()
    assert lines[:5] == [
        "65534",
        str(NOBODY.pw_gid),
        str(NOBODY.pw_gid),
        f"{NOBODY.pw_dir} nobody",
        str(shared),
    ]
    assert "Permission denied" in lines[5]
    assert SECRET not in (result.output or "")


async def test_the_worker_user_reads_what_the_command_user_cannot(shared: Path) -> None:
    """The same job as root (the reproduction of the review's finding): it reads the file."""
    result = await run(("cat", "cronwheel.db"), CommandIsolation(), cwd=str(shared))
    assert (result.outcome, result.output) == (Outcome.SUCCESS, SECRET)


async def test_no_way_back_to_root() -> None:
    script = "import os\ntry:\n    os.setuid(0)\nexcept PermissionError:\n    print('stays', os.getresuid())"
    result = await run(("/usr/bin/python3", "-c", script), CommandIsolation(user="nobody", group="nogroup"))
    assert result.outcome is Outcome.SUCCESS, result
    assert result.output == "stays (65534, 65534, 65534)\n"


async def test_a_command_without_cwd_starts_in_root_not_in_the_workers_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the worker's directory, as a data directory often is
    as_worker = await run(("pwd",), CommandIsolation())
    as_nobody = await run(("pwd",), CommandIsolation(user="nobody"))
    chosen = await run(("pwd",), CommandIsolation(cwd="/tmp"))
    assert (as_worker.output, as_nobody.output, chosen.output) == ("/\n", "/\n", "/tmp\n")


def limits_of(output: str) -> dict[str, str]:
    """``/proc/self/limits`` as {name: soft limit}."""
    found = {}
    for line in output.splitlines()[1:]:
        name, soft = line[:26].strip(), line[26:47].strip()
        found[name] = soft
    return found


async def test_default_limits() -> None:
    own = limits_of((await run(("cat", "/proc/self/limits"), CommandIsolation())).output or "")
    nobody = limits_of(
        (await run(("cat", "/proc/self/limits"), CommandIsolation(user="nobody"))).output or ""
    )
    for limits in (own, nobody):
        assert limits["Max cpu time"] == "3600"
        assert limits["Max address space"] == str(8 * 1024**3)
        assert limits["Max open files"] == "1024"
        assert limits["Max file size"] == str(1024**3)
    assert nobody["Max processes"] == "512"  # a user of their own: its processes are the commands'
    assert own["Max processes"] != "512"  # the worker's user: its count holds the worker's threads


async def test_limits_are_enforced(shared: Path) -> None:
    tight = CommandIsolation(user="nobody", limits=CommandLimits.parse(["cpu=1", "fsize=64K"]))
    busy = await run(("sh", "-c", "while :; do :; done"), tight)
    big = await run(("sh", "-c", "exec head -c 1M /dev/zero > big.out"), tight, cwd=str(shared))
    assert (busy.outcome, busy.error) == (Outcome.FAILURE, "killed by SIGKILL")  # hard limit = soft
    assert (big.outcome, big.error) == (Outcome.FAILURE, "killed by SIGXFSZ")
    assert (shared / "big.out").stat().st_size == 64 * 1024


def test_limit_options() -> None:
    parsed = CommandLimits.parse(["cpu=600", "as=2G", "nofile=256", "nproc=unlimited", "fsize=10M"])
    assert parsed == CommandLimits(600, 2 * 1024**3, 256, None, 10 * 1024**2)
    assert CommandLimits.parse([]) == CommandLimits()
    assert CommandLimits().processes == AUTO
    for bad in ("cpu", "cpu=", "cpu=-1", "cpu=0", "as=2X", "speed=1", "cpu=1.5"):
        with pytest.raises(InvalidInputError, match="--command-limit"):
            CommandLimits.parse([bad])


def test_users_and_groups_are_checked_when_the_worker_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidInputError, match="no such user"):
        CommandExecutor(WorkerSettings(allow_commands=True, isolation=CommandIsolation(user="no-such-user")))
    with pytest.raises(InvalidInputError, match="no such group"):
        CommandIsolation(user="nobody", group="no-such-group").identity()
    with pytest.raises(InvalidInputError, match="absolute"):
        CommandIsolation(cwd="relative").identity()
    identity = CommandIsolation(user="65534").identity()
    assert identity is not None
    assert (identity.uid, identity.name) == (65534, "nobody")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(InvalidInputError, match="needs a worker running as root"):
        CommandIsolation(user="nobody").identity()


def test_root_runs_commands_as_nobody_unless_told() -> None:
    assert default_user(allow_commands=True, user=None) == "nobody"
    assert default_user(allow_commands=True, user="root") == "root"
    assert default_user(allow_commands=False, user=None) is None


def test_a_server_that_cannot_isolate_does_not_start() -> None:
    unknown = ServerSettings(allow_commands=True, command_isolation=CommandIsolation(user="no-such-user"))
    with pytest.raises(InvalidInputError, match="no such user"):
        unknown.check()
    assert ServerSettings(allow_commands=True).isolation().user == "nobody"  # we run as root
    ServerSettings(allow_commands=False, command_isolation=CommandIsolation(user="x")).check()  # unused


async def test_the_workers_own_user_switches_nothing() -> None:
    """``--command-user`` naming the worker's own user: no setgroups (it needs root), no switch."""
    mine = CommandIsolation(user=str(os.geteuid()))
    assert mine.guard_setup(mine.identity())[:2] == (-1, -1)
    result = await run(("id", "-u"), mine)
    assert (result.outcome, result.output) == (Outcome.SUCCESS, f"{os.geteuid()}\n")
