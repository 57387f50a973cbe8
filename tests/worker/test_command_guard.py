"""The guard of a command attempt (``executors/guard.py``), with real processes: a worker killed
with SIGKILL takes its command's whole process group with it, a guard that dies does not leave
the group unwatched, and the guard is otherwise invisible (PATH lookup, exit codes)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cronwheel.model import CommandTarget, Outcome
from cronwheel.worker.executors import AttemptContext, WorkerSettings
from cronwheel.worker.executors import guard as guard_module
from cronwheel.worker.executors.command import CommandExecutor

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="Linux is the platform whose orphan handling matters (subreaper, /proc)"
)

GONE_WITHIN_S = 2.0

HOST = """
import asyncio, sys
from datetime import UTC, datetime
from cronwheel.model import CommandTarget
from cronwheel.worker.executors import AttemptContext, WorkerSettings
from cronwheel.worker.executors.command import CommandExecutor

async def main() -> None:
    ctx = AttemptContext(execution_id="run-1", job_id="job-1", job_name="orphan", team="ops",
                         scheduled_at=datetime.now(UTC), attempt=1, timeout_s=120)
    target = CommandTarget(argv=("/bin/sh", "-c", sys.argv[1]))
    await CommandExecutor(WorkerSettings(allow_commands=True)).execute(target, ctx)

asyncio.run(main())
"""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie runs nothing: it counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def wait_until(condition: Callable[[], bool], within: float) -> float | None:
    """Seconds until ``condition()`` held (polled every 10 ms), or None if it did not within."""
    started = time.monotonic()
    while time.monotonic() - started < within:
        if condition():
            return time.monotonic() - started
        time.sleep(0.01)
    return None


def read_pid(path: Path, within: float = 10.0) -> int:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if path.exists():
            return int(path.read_text())
        time.sleep(0.01)
    raise AssertionError(f"no pid written to {path}")


def family(child: Path, grandchild: Path, then: str) -> str:
    """A shell script that starts a grandchild ``sleep 60``, writes its pid and its own (each file
    complete once it exists), then runs ``then``."""
    return (
        f"sleep 60 & echo $! > {grandchild}.tmp; mv {grandchild}.tmp {grandchild}; "
        f"echo $$ > {child}.tmp; mv {child}.tmp {child}; {then}"
    )


@pytest.fixture
def pid_files(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """Where the child and the grandchild write their pids; afterwards, whatever is left of the
    child's process group is killed (when a test failed)."""
    child, grandchild = tmp_path / "child.pid", tmp_path / "grandchild.pid"
    yield child, grandchild
    if child.exists():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(int(child.read_text()), signal.SIGKILL)


def test_kill_9_of_the_worker_ends_the_commands_whole_group(pid_files: tuple[Path, Path]) -> None:
    child_file, grandchild_file = pid_files
    host = subprocess.Popen([sys.executable, "-c", HOST, family(child_file, grandchild_file, "sleep 60")])
    try:
        child, grandchild = read_pid(child_file), read_pid(grandchild_file)
        assert alive(child)
        assert alive(grandchild)
        assert os.getpgid(grandchild) == child  # the program leads the group the grandchild is in
        host.kill()  # SIGKILL: the worker gets no chance to clean up
        host.wait()
        took = wait_until(lambda: not alive(child) and not alive(grandchild), GONE_WITHIN_S)
        assert took is not None, (
            f"still running {GONE_WITHIN_S} s after the worker died: "
            f"child {alive(child)}, grandchild {alive(grandchild)}"
        )
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()


def make_ctx(timeout_s: float = 10.0) -> AttemptContext:
    return AttemptContext(
        execution_id="run-7",
        job_id="job-9",
        job_name="guarded",
        team="ops",
        scheduled_at=datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC),
        attempt=1,
        timeout_s=timeout_s,
    )


async def test_a_guard_that_dies_does_not_leave_the_group_unwatched(pid_files: tuple[Path, Path]) -> None:
    child_file, grandchild_file = pid_files
    executor = CommandExecutor(WorkerSettings(allow_commands=True, kill_grace_s=0.3))
    script = family(child_file, grandchild_file, "wait")
    attempt = asyncio.create_task(executor.execute(CommandTarget(argv=("/bin/sh", "-c", script)), make_ctx()))
    child = await asyncio.to_thread(read_pid, child_file)
    grandchild = await asyncio.to_thread(read_pid, grandchild_file)
    guard_pid = parent_of(child)
    assert guard_pid != os.getpid()  # the program is the guard's child, not the worker's
    os.kill(guard_pid, signal.SIGKILL)
    result = await asyncio.wait_for(attempt, GONE_WITHIN_S)
    assert result.outcome is Outcome.FAILURE
    assert result.error == "killed by SIGKILL"
    assert not alive(child)
    assert await asyncio.to_thread(wait_until, lambda: not alive(grandchild), GONE_WITHIN_S) is not None


async def test_orphans_of_the_program_are_adopted_and_reaped_by_its_guard(tmp_path: Path) -> None:
    """The guard is the child subreaper of the program's descendants: an orphan becomes its child
    (not pid 1's, which may reap nothing), and is reaped when it ends with the group."""
    orphan_file, child_file = tmp_path / "orphan.pid", tmp_path / "child.pid"
    script = (
        f"(sleep 30 & echo $! > {orphan_file}.tmp; mv {orphan_file}.tmp {orphan_file}); "
        f"echo $$ > {child_file}.tmp; mv {child_file}.tmp {child_file}; sleep 30"
    )
    executor = CommandExecutor(WorkerSettings(allow_commands=True, kill_grace_s=0.3))
    attempt = asyncio.create_task(executor.execute(CommandTarget(argv=("/bin/sh", "-c", script)), make_ctx()))
    try:
        child = await asyncio.to_thread(read_pid, child_file)
        orphan = await asyncio.to_thread(read_pid, orphan_file)
        guard_pid = parent_of(child)
        assert guard_pid != os.getpid()
        assert parent_of(orphan) == guard_pid
    finally:
        attempt.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await attempt
    with pytest.raises(ProcessLookupError):  # ended and reaped: not even a zombie
        os.kill(orphan, 0)


async def test_program_is_looked_up_on_the_targets_path(tmp_path: Path) -> None:
    tool = tmp_path / "cronwheel-test-tool"
    tool.write_text('#!/bin/sh\necho found "$@"\nexit 3\n')
    tool.chmod(0o755)
    executor = CommandExecutor(WorkerSettings(allow_commands=True))
    target = CommandTarget(argv=(tool.name, "a b"), env=(("PATH", f"/nonexistent:{tmp_path}:/usr/bin:/bin"),))
    result = await executor.execute(target, make_ctx())
    assert result.outcome is Outcome.FAILURE
    assert (result.exit_code, result.output) == (3, "found a b\n")


def test_protocol_round_trips() -> None:
    argv = [b"/bin/echo", b"", b"caf\xc3\xa9", b"a=b"]
    env = {b"PATH": b"/bin", b"EMPTY": b"", b"EQ": b"x=y=z"}
    setup = (65534, 65534, [(0, 3600), (9, 1024)])
    message = guard_module.encode_spec(argv, env, setup)
    assert int.from_bytes(message[:4], "big") == len(message) - 4
    assert guard_module.decode_spec(message[4:]) == (argv, env, setup)
    none = guard_module.decode_spec(guard_module.encode_spec([b"true"], {})[4:])
    assert none == ([b"true"], {}, (-1, -1, []))
    for tag, value in [
        (guard_module.STARTED, 4_194_304),
        (guard_module.EXITED, -9),
        (guard_module.FAILED, 2),
    ]:
        record = guard_module.encode_record(tag, value)
        assert len(record) == guard_module.RECORD_SIZE
        assert guard_module.decode_record(record) == (tag, value)
