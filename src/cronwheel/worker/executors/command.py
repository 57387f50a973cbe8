"""Command targets: one program run per attempt, as an argv list, never through a shell.

The program starts in a new session (``start_new_session=True``), so it leads its own process
group and everything it spawns is in that group. When the attempt ends, by timeout or by
cancellation, or because the program exited and left children behind, the whole group gets
SIGTERM, then SIGKILL after ``WorkerSettings.kill_grace_s``, and the program is reaped: no orphan
outlives its attempt. (A descendant that deliberately leaves the group with ``setsid`` is out of
reach; containing those takes cgroups, which the worker's deployment must provide.)

Stdout and stderr share one pipe (as ``2>&1`` would), so the kept output is the last
``output_limit`` bytes of what a terminal would have shown, in order; memory stays bounded however
much the program writes. The payload's JSON is the program's stdin, which then ends (EOF); without
a payload stdin is ``/dev/null``. The environment is a minimal base (PATH, LANG, HOME from the
worker's), the target's ``env``, then ``CRONWHEEL_EXECUTION_ID``, ``CRONWHEEL_JOB_ID``,
``CRONWHEEL_SCHEDULED_AT`` and ``CRONWHEEL_ATTEMPT``. Environment values are never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from cronwheel.clock import Clock, SystemClock
from cronwheel.model import CommandTarget, Outcome
from cronwheel.store.port import AttemptResult
from cronwheel.worker.executors.base import AttemptContext, WorkerSettings, decode_cut, rfc3339

log = logging.getLogger(__name__)

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DISABLED = "command targets are disabled on this worker"
_DRAIN_S = 0.5  # after the program exits, how long its output may still flow
_POLL_S = 0.02
_READ_CHUNK = 65536


def base_environment(source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The minimal environment every command starts from, taken from the worker's own."""
    env = os.environ if source is None else source
    return {
        "PATH": env.get("PATH") or DEFAULT_PATH,
        "LANG": env.get("LANG") or "C.UTF-8",
        "HOME": env.get("HOME") or "/",
    }


class CommandExecutor:
    """Runs command targets as subprocesses of the worker (only when the worker allows it)."""

    def __init__(
        self,
        settings: WorkerSettings | None = None,
        *,
        clock: Clock | None = None,
        base_env: Mapping[str, str] | None = None,
    ) -> None:
        self._settings = settings or WorkerSettings()
        self._clock: Clock = clock or SystemClock()
        self._base_env = dict(base_env) if base_env is not None else base_environment()

    async def close(self) -> None:
        """Nothing to release: every attempt cleans up its own processes."""

    async def execute(self, target: CommandTarget, ctx: AttemptContext) -> AttemptResult:
        problem = self._refusal(target)
        if problem is not None:
            return AttemptResult(Outcome.ERROR, error=problem)
        budget = ctx.budget_s(self._clock.now())
        if budget <= 0:
            return AttemptResult(Outcome.TIMEOUT, error="the attempt's deadline passed before it started")
        program = target.argv[0]
        try:
            proc, output = await self._spawn(target, ctx)
        except FileNotFoundError:
            return AttemptResult(Outcome.ERROR, error=f"executable not found: {program}")
        except PermissionError:
            return AttemptResult(Outcome.ERROR, error=f"permission denied executing {program}")
        except OSError as exc:
            return AttemptResult(Outcome.ERROR, error=f"cannot start {program}: {exc.strerror or exc}")
        log.debug(
            "command attempt job=%s run=%s attempt=%d pid=%d",
            ctx.job_id,
            ctx.execution_id,
            ctx.attempt,
            proc.pid,
        )
        try:
            return await self._supervise(proc, output, budget)
        finally:
            output.close()

    def _refusal(self, target: CommandTarget) -> str | None:
        if not self._settings.allow_commands:
            return DISABLED
        if not target.argv or not target.argv[0]:
            return "the command has an empty argv"
        if target.cwd is not None:
            if not os.path.isabs(target.cwd):
                return f"cwd must be an absolute path: {target.cwd}"
            if not Path(target.cwd).is_dir():
                return f"cwd is not an existing directory: {target.cwd}"
        return None

    def _environment(self, target: CommandTarget, ctx: AttemptContext) -> dict[str, str]:
        env = dict(self._base_env)
        env.update(target.env)
        env.update(
            CRONWHEEL_EXECUTION_ID=ctx.execution_id,
            CRONWHEEL_JOB_ID=ctx.job_id,
            CRONWHEEL_SCHEDULED_AT=rfc3339(ctx.scheduled_at),
            CRONWHEEL_ATTEMPT=str(ctx.attempt),
        )
        return env

    async def _spawn(
        self, target: CommandTarget, ctx: AttemptContext
    ) -> tuple[asyncio.subprocess.Process, _Output]:
        """Start the program with the payload as stdin and our own pipe as stdout and stderr.

        The pipe is ours, not asyncio's: ``Process.wait()`` of a process started with ``PIPE``
        also waits until every holder of the pipe has closed it, so a background child that
        inherited stdout would keep the attempt open after the program itself exited.
        """
        read_fd, write_fd = os.pipe()
        try:
            with _stdin_for(ctx.payload) as stdin:
                proc = await asyncio.create_subprocess_exec(
                    *target.argv,
                    stdin=stdin,
                    stdout=write_fd,
                    stderr=asyncio.subprocess.STDOUT,
                    cwd=target.cwd,
                    env=self._environment(target, ctx),
                    start_new_session=True,
                    close_fds=True,
                )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)  # the child has its copy: EOF comes when the last holder exits
        try:
            output = await _Output.connect(read_fd, self._settings.output_limit)
        except BaseException:
            _signal_group(proc.pid, signal.SIGKILL)
            raise
        return proc, output

    async def _supervise(
        self, proc: asyncio.subprocess.Process, output: _Output, budget: float
    ) -> AttemptResult:
        try:
            try:
                async with asyncio.timeout(budget):
                    await proc.wait()
            except TimeoutError:
                killed = await self._terminate(proc)
                return AttemptResult(
                    Outcome.TIMEOUT,
                    error=f"timed out after {budget:g} s; process group "
                    + ("killed (SIGKILL)" if killed else "terminated (SIGTERM)"),
                    output=await output.text(),
                )
            if _group_alive(proc.pid):  # the program is done: so is what it left behind
                await self._terminate(proc)
        except asyncio.CancelledError:  # the attempt is over, so are its processes
            try:
                await self._terminate(proc)
            finally:
                _kill_now(proc)
            raise
        except BaseException:
            _kill_now(proc)
            raise
        code = proc.returncode
        assert code is not None
        text = await output.text()
        if code == 0:
            return AttemptResult(Outcome.SUCCESS, exit_code=0, output=text)
        return AttemptResult(Outcome.FAILURE, exit_code=code, error=_exit_text(code), output=text)

    async def _terminate(self, proc: asyncio.subprocess.Process) -> bool:
        """SIGTERM the process group, SIGKILL it after the grace, reap the program. Returns
        whether SIGKILL was needed."""
        pgid = proc.pid  # a session leader's pid is its process group id
        grace = self._settings.kill_grace_s
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        _signal_group(pgid, signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace):
                await proc.wait()
        while _group_alive(pgid) and loop.time() < deadline:
            await asyncio.sleep(_POLL_S)
        killed = proc.returncode is None or _group_alive(pgid)
        if killed:
            _signal_group(pgid, signal.SIGKILL)
        await proc.wait()
        return killed


class _Tail:
    """The last ``limit`` bytes written to it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.data += chunk
        if len(self.data) > self.limit:
            del self.data[: len(self.data) - self.limit]

    def text(self) -> str:
        if self.total > len(self.data):  # the start was cut off
            return decode_cut(bytes(self.data))
        return self.data.decode(errors="replace")


class _Output:
    """The read end of the program's stdout+stderr pipe, pumped into a bounded tail."""

    def __init__(self, transport: asyncio.ReadTransport, reader: asyncio.StreamReader, limit: int) -> None:
        self._transport = transport
        self._tail = _Tail(limit)
        self._pump = asyncio.create_task(self._read(reader))

    @classmethod
    async def connect(cls, read_fd: int, limit: int) -> _Output:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        pipe = os.fdopen(read_fd, "rb", buffering=0)  # the transport closes it
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
        return cls(transport, reader, limit)

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while chunk := await reader.read(_READ_CHUNK):
            self._tail.add(chunk)

    async def drained(self, within: float) -> bool:
        """Wait up to ``within`` seconds for EOF (every holder of the pipe closed it)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await asyncio.shield(self._pump)
        return self._pump.done()

    async def text(self) -> str:
        """The kept output, once the pipe is at EOF or after a short wait (a descendant that
        escaped the process group may hold the pipe open forever)."""
        await self.drained(_DRAIN_S)
        return self._tail.text()

    def close(self) -> None:
        self._pump.cancel()
        self._transport.close()


@contextlib.contextmanager
def _stdin_for(payload: Any) -> Iterator[int]:
    """The program's stdin: /dev/null without a payload, else an unlinked temporary file holding
    the payload's JSON. The program reads it to EOF exactly as from a pipe closed after the
    payload, but one that never reads it cannot block the worker nor die of SIGPIPE."""
    if payload is None:
        yield asyncio.subprocess.DEVNULL
        return
    with tempfile.TemporaryFile() as file:
        file.write(json.dumps(payload).encode())
        file.flush()
        file.seek(0)
        yield file.fileno()


def _kill_now(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL what is left of the attempt's process group."""
    if proc.returncode is None or _group_alive(proc.pid):
        _signal_group(proc.pid, signal.SIGKILL)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    """Whether process group ``pgid`` still has a member that is not a zombie (a zombie runs
    nothing; where pid 1 does not reap orphans, killed ones stay zombies for good)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True  # no way to tell zombies apart: assume alive
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp ...
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}"
    return f"exited with status {code}"
