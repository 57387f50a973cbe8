"""CommandExecutor with real subprocesses (POSIX sh and the test's own Python)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cronwheel.model import CommandTarget, Outcome
from cronwheel.worker.executors import AttemptContext, Executors, WorkerSettings
from cronwheel.worker.executors.command import DISABLED, CommandExecutor, base_environment
from cronwheel.worker.executors.live import OutputSoFar

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="process groups are POSIX")

SLOT = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
ALLOW = WorkerSettings(allow_commands=True, kill_grace_s=0.3)


def make_ctx(**changes: Any) -> AttemptContext:
    ctx = AttemptContext(
        execution_id="run-7",
        job_id="job-9",
        job_name="backup",
        team="ops",
        scheduled_at=SLOT,
        attempt=3,
        timeout_s=5.0,
        payload=None,
    )
    return replace(ctx, **changes)


def sh(script: str, **changes: Any) -> CommandTarget:
    return replace(CommandTarget(argv=("/bin/sh", "-c", script)), **changes)


@pytest.fixture
def executor() -> CommandExecutor:
    return CommandExecutor(ALLOW)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs. A zombie counts as dead: it runs nothing, and where pid 1 does not
    reap orphans (some containers) a killed grandchild stays a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state not in ("Z", "X")


async def wait_dead(pid: int, within: float = 1.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        await asyncio.sleep(0.01)
    return not alive(pid)


async def read_pid(path: Path) -> int:
    for _ in range(200):
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        await asyncio.sleep(0.01)
    raise AssertionError(f"no pid written to {path}")


# -- refusals --------------------------------------------------------------------------------------


async def test_the_output_so_far_shows_each_line_as_it_comes(executor: CommandExecutor) -> None:
    """While the program runs, ``ctx.live`` holds what it wrote so far: the first line before the
    second exists; at the end the attempt's result holds both and ``ctx.live`` nothing."""
    live = OutputSoFar()
    script = "echo first; sleep 2; echo second"
    attempt = asyncio.create_task(executor.execute(CommandTarget(("sh", "-c", script)), make_ctx(live=live)))
    async with asyncio.timeout(5):
        while live.text(65_536) is None:
            await asyncio.sleep(0.01)
    assert live.text(65_536) == "first\n"
    assert live.text(3) == "st\n"  # the last characters only
    result = await asyncio.wait_for(attempt, 5)
    assert result.output == "first\nsecond\n"
    assert live.text(65_536) is None


async def test_disabled_by_default(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    result = await CommandExecutor().execute(sh(f"touch {marker}"), make_ctx())
    assert result.outcome is Outcome.ERROR
    assert result.error == DISABLED == "command targets are disabled on this worker"
    assert not marker.exists()


async def test_registry_refuses_commands_by_default() -> None:
    executors = Executors()
    result = await executors.execute(sh("true"), make_ctx())
    await executors.close()
    assert result.error == DISABLED


async def test_missing_executable(executor: CommandExecutor) -> None:
    result = await executor.execute(CommandTarget(argv=("/nonexistent/cronwheel-tool", "x")), make_ctx())
    assert result.outcome is Outcome.ERROR
    assert result.error == "executable not found: /nonexistent/cronwheel-tool"

    on_path = await executor.execute(CommandTarget(argv=("cronwheel-no-such-program",)), make_ctx())
    assert on_path.outcome is Outcome.ERROR
    assert on_path.error == "executable not found: cronwheel-no-such-program"


async def test_not_executable(executor: CommandExecutor, tmp_path: Path) -> None:
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    result = await executor.execute(CommandTarget(argv=(str(script),)), make_ctx())
    assert result.outcome is Outcome.ERROR
    assert result.error == f"permission denied executing {script}"


async def test_empty_argv(executor: CommandExecutor) -> None:
    result = await executor.execute(CommandTarget(argv=()), make_ctx())
    assert result.outcome is Outcome.ERROR


@pytest.mark.parametrize(
    ("cwd", "error"),
    [
        ("relative/dir", "target.cwd must be an absolute path"),
        ("/nonexistent/cronwheel-dir", "cwd is not an existing directory: /nonexistent/cronwheel-dir"),
    ],
)
async def test_bad_cwd(executor: CommandExecutor, cwd: str, error: str) -> None:
    result = await executor.execute(sh("pwd", cwd=cwd), make_ctx())
    assert result.outcome is Outcome.ERROR
    assert result.error == error


async def test_cwd(executor: CommandExecutor, tmp_path: Path) -> None:
    result = await executor.execute(sh("pwd", cwd=str(tmp_path)), make_ctx())
    assert result.outcome is Outcome.SUCCESS
    assert result.output == f"{tmp_path.resolve()}\n"


# -- exit codes, stdin, environment, output -----------------------------------------------------


async def test_exit_zero_is_success(executor: CommandExecutor) -> None:
    result = await executor.execute(CommandTarget(argv=("/bin/echo", "hello", "$HOME", ";", "x")), make_ctx())
    assert result.outcome is Outcome.SUCCESS
    assert result.exit_code == 0
    assert result.output == "hello $HOME ; x\n"  # argv, no shell: nothing expanded
    assert result.error is None


@pytest.mark.parametrize("code", [1, 3, 255])
async def test_nonzero_exit_is_failure(executor: CommandExecutor, code: int) -> None:
    result = await executor.execute(sh(f"echo failing; exit {code}"), make_ctx())
    assert result.outcome is Outcome.FAILURE
    assert result.exit_code == code
    assert result.error == f"exited with status {code}"
    assert result.output == "failing\n"


async def test_killed_by_signal(executor: CommandExecutor) -> None:
    result = await executor.execute(sh("kill -KILL $$"), make_ctx())
    assert result.outcome is Outcome.FAILURE
    assert result.exit_code == -9
    assert result.error == "killed by SIGKILL"


async def test_payload_on_stdin(executor: CommandExecutor) -> None:
    payload = {"items": [1, 2, 3], "name": "né"}
    result = await executor.execute(sh("cat"), make_ctx(payload=payload))
    assert result.outcome is Outcome.SUCCESS
    assert result.output is not None
    assert json.loads(result.output) == payload


async def test_no_payload_means_empty_stdin(executor: CommandExecutor) -> None:
    result = await executor.execute(sh("wc -c"), make_ctx(payload=None))
    assert result.output is not None
    assert result.output.strip() == "0"


async def test_program_ignoring_a_large_payload(executor: CommandExecutor) -> None:
    """stdin is a pipe the program never reads: the write must not hang the attempt."""
    result = await executor.execute(sh("exit 0"), make_ctx(payload="x" * 1_000_000))
    assert result.outcome is Outcome.SUCCESS


async def test_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKER_SECRET", "do-not-leak")
    executor = CommandExecutor(ALLOW)  # reads the worker's environment when made
    target = sh("env | sort", env=(("FOO", "bar baz"), ("CRONWHEEL_ATTEMPT", "forged")))
    result = await executor.execute(target, make_ctx())
    assert result.output is not None
    env = dict(line.split("=", 1) for line in result.output.splitlines() if "=" in line)
    assert env["CRONWHEEL_EXECUTION_ID"] == "run-7"
    assert env["CRONWHEEL_JOB_ID"] == "job-9"
    assert env["CRONWHEEL_SCHEDULED_AT"] == "2025-01-02T03:04:05Z"
    assert env["CRONWHEEL_ATTEMPT"] == "3"  # cronwheel's variables win
    assert env["FOO"] == "bar baz"
    assert env["PATH"] == os.environ["PATH"]
    assert "HOME" in env
    assert "LANG" in env
    assert "WORKER_SECRET" not in env


def test_base_environment_defaults() -> None:
    assert base_environment({}) == {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG": "C.UTF-8",
        "HOME": "/",
    }
    assert base_environment({"PATH": "/x", "HOME": "/h", "LANG": "de_DE.UTF-8", "AWS_SECRET": "k"}) == {
        "PATH": "/x",
        "LANG": "de_DE.UTF-8",
        "HOME": "/h",
    }


async def test_output_is_the_tail_of_stdout_and_stderr(executor: CommandExecutor) -> None:
    script = "import sys\nprint('A' * 5000)\nsys.stdout.flush()\nprint('oops', file=sys.stderr)\nprint('END')"
    result = await executor.execute(CommandTarget(argv=(sys.executable, "-c", script)), make_ctx())
    assert result.outcome is Outcome.SUCCESS
    assert result.output is not None
    assert len(result.output.encode()) == 1024
    assert result.output.endswith("A\noops\nEND\n")


async def test_nul_bytes_in_the_output_are_kept_as_storable_text() -> None:
    """A NUL in the kept output would make PostgreSQL refuse to record the attempt."""
    executors = Executors(ALLOW)
    try:
        result = await executors.execute(sh(r"printf 'a\000b'"), make_ctx())
    finally:
        await executors.close()
    assert (result.outcome, result.output) == (Outcome.SUCCESS, "a\ufffdb")


@pytest.mark.parametrize(
    ("text", "limit", "tail"),
    [
        ("abcdé\\n", 4, "dé\n"),  # last 4 bytes: 64 c3 a9 0a
        ("aéxyz", 4, "xyz"),  # last 4 bytes: a9 78 79 7a, the cut "é" is dropped
        ("a€xyz", 5, "xyz"),  # last 5 bytes: 82 ac 78 79 7a
        ("a€xyz", 6, "€xyz"),
    ],
)
async def test_tail_drops_a_character_cut_in_two(text: str, limit: int, tail: str) -> None:
    executor = CommandExecutor(replace(ALLOW, output_limit=limit))
    result = await executor.execute(sh(f"printf '{text}'"), make_ctx())
    assert result.output == tail


# -- timeouts and process groups ------------------------------------------------------------------


async def test_timeout_kills_the_whole_group(executor: CommandExecutor, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    started = time.monotonic()
    result = await executor.execute(
        sh(f"echo started; sleep 30 & echo $! > {pidfile}; wait"), make_ctx(timeout_s=0.5)
    )
    elapsed = time.monotonic() - started
    assert result.outcome is Outcome.TIMEOUT
    assert result.error == "timed out after 0.5 s; process group terminated (SIGTERM)"
    assert result.output == "started\n"
    assert elapsed < 0.5 + 0.3 + 0.5
    assert await wait_dead(await read_pid(pidfile))


async def test_timeout_escalates_to_sigkill(executor: CommandExecutor, tmp_path: Path) -> None:
    """The program and its grandchild ignore SIGTERM: SIGKILL after the grace ends them both."""
    pidfile = tmp_path / "grandchild.pid"
    started = time.monotonic()
    result = await executor.execute(
        sh(f"trap '' TERM; sleep 30 & echo $! > {pidfile}; wait; wait; wait"), make_ctx(timeout_s=0.3)
    )
    elapsed = time.monotonic() - started
    assert result.outcome is Outcome.TIMEOUT
    assert result.error == "timed out after 0.3 s; process group killed (SIGKILL)"
    assert 0.3 + 0.3 <= elapsed < 0.3 + 0.3 + 0.5
    assert await wait_dead(await read_pid(pidfile))


async def test_python_grandchild_killed_on_timeout(executor: CommandExecutor, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    script = (
        "import subprocess, sys, time\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(60)\n"
    )
    result = await executor.execute(
        CommandTarget(argv=(sys.executable, "-c", script)), make_ctx(timeout_s=0.5)
    )
    assert result.outcome is Outcome.TIMEOUT
    assert await wait_dead(await read_pid(pidfile))


async def test_leftover_background_process_is_ended(executor: CommandExecutor, tmp_path: Path) -> None:
    """The program exits at once, leaving a child that holds its stdout: the attempt still ends
    promptly with the program's exit status, and the child does not outlive it."""
    pidfile = tmp_path / "bg.pid"
    started = time.monotonic()
    result = await executor.execute(sh(f"sleep 30 & echo $! > {pidfile}; echo done"), make_ctx(timeout_s=10))
    assert result.outcome is Outcome.SUCCESS
    assert result.output == "done\n"
    assert time.monotonic() - started < 0.5
    assert await wait_dead(await read_pid(pidfile))


async def test_group_is_killed_when_the_program_exits_but_a_descendant_ignores_sigterm(
    executor: CommandExecutor, tmp_path: Path
) -> None:
    """The program ends at SIGTERM, its grandchild ignores it: the worker watches the group through
    the grace, then SIGKILLs what is left."""
    pidfile = tmp_path / "grandchild.pid"
    script = f"trap 'exit 0' TERM; (trap '' TERM; exec sleep 30) & echo $! > {pidfile}; wait"
    started = time.monotonic()
    result = await executor.execute(sh(script), make_ctx(timeout_s=0.3))
    elapsed = time.monotonic() - started
    assert result.outcome is Outcome.TIMEOUT
    assert result.error == "timed out after 0.3 s; process group killed (SIGKILL)"
    assert 0.3 + 0.3 <= elapsed < 0.3 + 0.3 + 0.5
    assert await wait_dead(await read_pid(pidfile))


def gone(pid: int) -> bool:
    """Not even a zombie: the process was reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


async def test_descendants_that_exited_do_not_hold_the_attempt(tmp_path: Path) -> None:
    """An orphan that exited while the program ran is reaped by the attempt's guard (its
    subreaper), so it neither stays a zombie where pid 1 reaps nothing (a container whose pid 1
    is the worker) nor looks like a live member of the group: the attempt ends when the program
    does, not after the kill grace."""
    pidfile = tmp_path / "orphan.pid"
    executor = CommandExecutor(replace(ALLOW, kill_grace_s=5.0))
    started = time.monotonic()
    result = await executor.execute(
        sh(f"(sleep 0.05 & echo $! > {pidfile}); sleep 0.3; echo done"), make_ctx()
    )
    elapsed = time.monotonic() - started
    assert (result.outcome, result.output) == (Outcome.SUCCESS, "done\n")
    assert elapsed < 2.0  # not the 5 s grace
    assert gone(await read_pid(pidfile))


async def test_killed_descendants_are_reaped(executor: CommandExecutor, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    result = await executor.execute(sh(f"sleep 30 & echo $! > {pidfile}; wait"), make_ctx(timeout_s=0.3))
    assert result.outcome is Outcome.TIMEOUT
    pid = await read_pid(pidfile)
    deadline = time.monotonic() + 1.0
    while not gone(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert gone(pid), "left as a zombie"


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
async def test_no_descriptor_leaks(executor: CommandExecutor) -> None:
    async def run_all() -> None:
        await executor.execute(sh("cat; echo err >&2; exit 1"), make_ctx(payload=[1, 2]))
        await executor.execute(sh("sleep 30 & wait"), make_ctx(timeout_s=0.05))
        await executor.execute(CommandTarget(argv=("/nonexistent/x",)), make_ctx(payload={}))

    await run_all()  # warm up (the loop's child watcher, thread pools)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        await run_all()
    assert len(os.listdir("/proc/self/fd")) == before


async def test_cancellation_ends_the_group(executor: CommandExecutor, tmp_path: Path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    task = asyncio.create_task(executor.execute(sh(f"sleep 30 & echo $! > {pidfile}; wait"), make_ctx()))
    pid = await read_pid(pidfile)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_dead(pid)


async def test_deadline_in_the_past(executor: CommandExecutor, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    result = await executor.execute(
        sh(f"touch {marker}"), make_ctx(deadline=datetime(2000, 1, 1, tzinfo=UTC))
    )
    assert result.outcome is Outcome.TIMEOUT
    assert not marker.exists()


# -- output beyond the excerpt -------------------------------------------------------------------


async def test_output_beyond_the_excerpt_keeps_a_bounded_tail() -> None:
    executor = CommandExecutor(replace(ALLOW, output_tail_bytes=4096))
    script = "i=0; while [ $i -lt 1000 ]; do echo line-$i; i=$((i+1)); done"  # 8,890 bytes
    result = await executor.execute(sh(script), make_ctx())
    assert result.output is not None
    assert result.output_tail is not None
    assert len(result.output.encode()) == 1024  # the excerpt, as before
    assert result.output_tail.endswith("line-999\n")
    assert len(result.output_tail.encode()) == 4096  # the last 4 KiB, not all 8,890 bytes
    assert result.output_tail.endswith(result.output)

    short = await executor.execute(sh("echo hi"), make_ctx())
    assert (short.output, short.output_tail) == ("hi\n", None)  # the excerpt holds it all
    none = await CommandExecutor(replace(ALLOW, output_tail_bytes=0)).execute(sh(script), make_ctx())
    assert none.output_tail is None
    assert none.output == result.output
