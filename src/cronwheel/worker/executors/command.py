"""Command targets: one program run per attempt, as an argv list, never through a shell.

The program starts in a new session, so it leads its own process group and everything it spawns
is in that group. When the attempt ends, by timeout or by cancellation, or because the program
exited and left children behind, the whole group gets SIGTERM, then SIGKILL after
``WorkerSettings.kill_grace_s``, and the program is reaped: no orphan outlives its attempt. (A
descendant that deliberately leaves the group with ``setsid`` is out of reach; containing those
takes cgroups, which the worker's deployment must provide.)

The worker does not fork the program itself: a small guard process per attempt
(:mod:`cronwheel.worker.executors.guard`, which says why this design) forks it and SIGKILLs its
whole process group the moment the worker dies, ``kill -9`` included, so a retry of the run never
overlaps an attempt whose worker is gone. :class:`_Guarded` is the program as the worker sees it
through the guard (pid = process group id, exit code, ``wait()``); the guard costs one small
interpreter start per attempt (about 15 ms, see the guard's docstring).

Stdout and stderr share one pipe (as ``2>&1`` would), so the kept output is the last
``output_limit`` bytes of what a terminal would have shown, in order; memory stays bounded however
much the program writes. The payload's JSON is the program's stdin, which then ends (EOF); without
a payload stdin is ``/dev/null``. The environment is a minimal base (PATH, LANG, HOME from the
worker's; HOME, USER and LOGNAME of the command user when there is one), the target's ``env``,
then ``CRONWHEEL_EXECUTION_ID``, ``CRONWHEEL_JOB_ID``, ``CRONWHEEL_SCHEDULED_AT`` and
``CRONWHEEL_ATTEMPT``. Environment values are never logged. A value
that refers to a team secret is resolved for the attempt (:mod:`cronwheel.secrets.resolve`), and
every resolved value is redacted from the kept output and error: a program that prints its
environment does not put the credential into the run's record.

The program runs as the configured command user and group, under resource limits, in ``cwd`` or
else ``/`` (never the worker's own directory, often its data directory):
:mod:`cronwheel.worker.executors.isolation` says what that isolates and what it does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import os
import signal
import socket
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from cronwheel.clock import Clock, SystemClock
from cronwheel.errors import InvalidInputError
from cronwheel.model import AttemptResult, CommandTarget, Outcome
from cronwheel.secrets.resolve import SecretResolver
from cronwheel.targets.kinds.command import check_command
from cronwheel.worker.executors import guard
from cronwheel.worker.executors.base import AttemptContext, WorkerSettings, decode_cut, rfc3339, with_secrets
from cronwheel.worker.executors.live import Redact

log = logging.getLogger(__name__)

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
DISABLED = "command targets are disabled on this worker"
_DRAIN_S = 0.5  # after the program exits, how long its output may still flow
_POLL_S = 0.02
_READ_CHUNK = 65536
_GUARD_DIRECTORY = str(Path(guard.__file__).resolve().parent)
_GUARD_EXIT_S = 5.0  # how long a guard told to go may take to exit before it is killed


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
        secrets: SecretResolver | None = None,
    ) -> None:
        self._settings = settings or WorkerSettings()
        self._clock: Clock = clock or SystemClock()
        isolation = self._settings.isolation
        self._identity = isolation.identity()  # InvalidInputError: a user this worker cannot become
        self._setup = isolation.guard_setup(self._identity)
        self._base_env = dict(base_env) if base_env is not None else base_environment()
        self._secrets = secrets or SecretResolver(None, None)
        if self._identity is not None:
            self._base_env.update(self._identity.environment())

    async def close(self) -> None:
        """Nothing to release: every attempt cleans up its own processes."""

    async def execute(self, target: CommandTarget, ctx: AttemptContext) -> AttemptResult:
        """Resolve the environment's secrets, run the program, and keep none of them in the result."""
        if not self._settings.allow_commands:
            return AttemptResult(Outcome.ERROR, error=DISABLED)
        return await with_secrets(
            self._secrets,
            ctx.team,
            target,
            lambda resolved: self._run(resolved.target(target), ctx, resolved.redact),
        )

    async def _run(self, target: CommandTarget, ctx: AttemptContext, redact: Redact) -> AttemptResult:
        problem = self._refusal(target)
        if problem is not None:
            return AttemptResult(Outcome.ERROR, error=problem)
        budget = ctx.budget_s(self._clock.now())
        if budget <= 0:
            return AttemptResult(Outcome.TIMEOUT, error="the attempt's deadline passed before it started")
        program = target.argv[0]
        try:  # past check_command, _spec can refuse (ValueError) only the worker's own variables
            spec = _spec(target.argv, self._environment(target, ctx), self._setup)
            proc, output = await self._spawn(target, ctx, spec)
        except (OSError, ValueError) as exc:
            return AttemptResult(Outcome.ERROR, error=_start_error(program, exc))
        log.debug(
            "command attempt job=%s run=%s attempt=%d pid=%d",
            ctx.job_id,
            ctx.execution_id,
            ctx.attempt,
            proc.pid,
        )
        if ctx.live is not None:  # the output so far, for the worker to write while it runs
            ctx.live.attach(output.so_far, redact, output.size)
        try:
            return await self._supervise(proc, output, budget)
        finally:
            if ctx.live is not None:
                ctx.live.detach()
            output.close()
            await proc.release()

    def _refusal(self, target: CommandTarget) -> str | None:
        """Why the attempt cannot start: commands are off here, the target is one no system could
        run (:mod:`cronwheel.targets.checks`, for jobs stored before the service refused it), or its
        ``cwd`` is not there now."""
        if not self._settings.allow_commands:
            return DISABLED
        try:
            check_command(target)
        except InvalidInputError as error:
            return str(error)
        if target.cwd is not None and not Path(target.cwd).is_dir():
            return f"cwd is not an existing directory: {target.cwd}"
        return None

    def _environment(self, target: CommandTarget, ctx: AttemptContext) -> dict[str, str]:
        env = dict(self._base_env)
        for name, value in target.env:
            assert isinstance(value, str), "secret references are resolved before the program starts"
            env[name] = value
        env.update(
            CRONWHEEL_EXECUTION_ID=ctx.execution_id,
            CRONWHEEL_JOB_ID=ctx.job_id,
            CRONWHEEL_SCHEDULED_AT=rfc3339(ctx.scheduled_at),
            CRONWHEEL_ATTEMPT=str(ctx.attempt),
        )
        return env

    async def _spawn(
        self, target: CommandTarget, ctx: AttemptContext, spec: bytes
    ) -> tuple[_Guarded, _Output]:
        """Start the program, through its guard, with the payload as stdin and our own pipe as
        stdout and stderr.

        The pipe is ours, not asyncio's: ``Process.wait()`` of a process started with ``PIPE``
        also waits until every holder of the pipe has closed it, so a background child that
        inherited stdout would keep the attempt open after the program itself exited.
        """
        read_fd, write_fd = os.pipe()
        ours, theirs = socket.socketpair()
        try:
            with _stdin_for(ctx.payload) as stdin:
                process = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-I",
                    "-S",
                    "-c",
                    guard.BOOTSTRAP,
                    _GUARD_DIRECTORY,
                    str(theirs.fileno()),
                    stdin=stdin,
                    stdout=write_fd,
                    stderr=asyncio.subprocess.STDOUT,
                    cwd=target.cwd or self._settings.isolation.cwd,  # not the worker's own
                    env=_guard_environment(),
                    start_new_session=True,
                    close_fds=True,
                    pass_fds=(theirs.fileno(),),
                )
        except BaseException:
            os.close(read_fd)
            ours.close()
            raise
        finally:
            os.close(write_fd)  # the guard has its copy: EOF comes when the last holder exits
            theirs.close()
        try:  # from here on, closing ``ours`` makes the guard end whatever it started, and exit
            output = await _Output.connect(
                read_fd, self._settings.output_limit, self._settings.output_tail_bytes
            )
        except BaseException:
            ours.close()
            await _reap(process)
            raise
        try:
            return await _Guarded.start(process, ours, spec), output
        except BaseException:
            output.close()
            raise

    async def _supervise(self, proc: _Guarded, output: _Output, budget: float) -> AttemptResult:
        try:
            try:
                async with asyncio.timeout(budget):
                    await proc.wait()
            except TimeoutError:
                killed = await self._terminate(proc)
                text, tail = await output.kept()
                return AttemptResult(
                    Outcome.TIMEOUT,
                    error=f"timed out after {budget:g} s; process group "
                    + ("killed (SIGKILL)" if killed else "terminated (SIGTERM)"),
                    output=text,
                    output_tail=tail,
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
        text, tail = await output.kept()
        if code == 0:
            return AttemptResult(Outcome.SUCCESS, exit_code=0, output=text, output_tail=tail)
        return AttemptResult(
            Outcome.FAILURE, exit_code=code, error=_exit_text(code), output=text, output_tail=tail
        )

    async def _terminate(self, proc: _Guarded) -> bool:
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


class _Guarded:
    """The program as the worker sees it through its guard (:mod:`.guard`): what this module
    used of ``asyncio.subprocess.Process`` (``pid``, ``returncode``, ``wait()``), plus
    ``release()``, which every attempt calls once at its very end."""

    def __init__(
        self,
        guard_process: asyncio.subprocess.Process,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pid: int,
    ) -> None:
        self.pid = pid  # also its process group id
        self.returncode: int | None = None
        self._guard = guard_process
        self._reader = reader
        self._writer = writer
        self._exit = asyncio.ensure_future(self._read_exit())

    @classmethod
    async def start(
        cls, guard_process: asyncio.subprocess.Process, channel: socket.socket, spec: bytes
    ) -> _Guarded:
        """Tell the guard what to run; return once it runs, or raise the ``OSError`` of its exec
        (``FileNotFoundError``, ``PermissionError`` ...)."""
        try:
            reader, writer = await asyncio.open_unix_connection(sock=channel)
        except BaseException:
            channel.close()
            await _reap(guard_process)
            raise
        try:
            writer.write(spec)
            await writer.drain()
            tag, value = guard.decode_record(await reader.readexactly(guard.RECORD_SIZE))
        except (asyncio.IncompleteReadError, ConnectionError) as error:
            writer.close()
            await _reap(guard_process)
            raise OSError(
                errno.EIO, f"its guard process failed (exit status {guard_process.returncode})"
            ) from error
        except BaseException:
            writer.close()  # the guard sees EOF: it ends the program if it started it, and exits
            await _reap(guard_process)
            raise
        if tag != guard.STARTED:
            writer.close()
            await _reap(guard_process)
            raise OSError(value, os.strerror(value))
        return cls(guard_process, reader, writer, value)

    async def _read_exit(self) -> int:
        try:
            tag, code = guard.decode_record(await self._reader.readexactly(guard.RECORD_SIZE))
        except (asyncio.IncompleteReadError, ConnectionError):
            tag, code = b"", -signal.SIGKILL
        if tag != guard.EXITED:  # the guard died first: nothing watches the group but us
            log.warning("the guard of command pid %d went away; killing its process group", self.pid)
            _signal_group(self.pid, signal.SIGKILL)
            code = -signal.SIGKILL
        self.returncode = code
        return code

    async def wait(self) -> int:
        """The program's exit code (negative: the signal that ended it), once it exited."""
        return await asyncio.shield(self._exit)

    async def release(self) -> None:
        """The attempt is over and its group dealt with: let the guard go (it SIGKILLs the group
        if the program still runs) and reap it."""
        self._exit.cancel()
        with contextlib.suppress(OSError):
            self._writer.write(guard.DONE)
        self._writer.close()
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()
        await _reap(self._guard)


async def _reap(process: asyncio.subprocess.Process) -> None:
    """Wait for a guard that was told to go (it exits at once); kill one that does not."""
    try:
        async with asyncio.timeout(_GUARD_EXIT_S):
            await process.wait()
    except TimeoutError:
        log.warning("command guard pid %d did not exit; killing it", process.pid)
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


def _spec(argv: Sequence[str], env: Mapping[str, str], setup: guard.Setup = guard.NO_SETUP) -> bytes:
    """The guard's instructions; refuses (ValueError) what ``subprocess`` would refuse, with its
    words: the protocol separates items with NUL."""
    args = [os.fsencode(arg) for arg in argv]
    variables = {os.fsencode(key): os.fsencode(value) for key, value in env.items()}
    if any(b"\0" in item for item in [*args, *variables, *variables.values()]):
        raise ValueError("embedded null byte")
    if any(b"=" in key for key in variables):
        raise ValueError("illegal environment variable name")
    return guard.encode_spec(args, variables, setup)


def _guard_environment() -> dict[str, str]:
    """The guard's own environment (the program's travels over the socket): only what this
    Python interpreter may need to start."""
    return {key: os.environ[key] for key in ("LD_LIBRARY_PATH",) if key in os.environ}


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

    def text(self, limit: int | None = None) -> str:
        """The last ``limit`` bytes kept (all of them by default) as text."""
        data = bytes(self.data if limit is None or limit >= len(self.data) else self.data[-limit:])
        if self.total > len(data):  # the start was cut off
            return decode_cut(data)
        return data.decode(errors="replace")


class _Output:
    """The read end of the program's stdout+stderr pipe, pumped into a bounded tail."""

    def __init__(
        self, transport: asyncio.ReadTransport, reader: asyncio.StreamReader, limit: int, tail: int
    ) -> None:
        self._transport = transport
        self._limit = limit
        self._tail = _Tail(max(limit, tail))
        self._pump = asyncio.create_task(self._read(reader))

    @classmethod
    async def connect(cls, read_fd: int, limit: int, tail: int) -> _Output:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        pipe = os.fdopen(read_fd, "rb", buffering=0)  # the transport closes it
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
        return cls(transport, reader, limit, tail)

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while chunk := await reader.read(_READ_CHUNK):
            self._tail.add(chunk)

    def so_far(self) -> str:
        """The output read so far (its kept tail), as text."""
        return self._tail.text()

    def size(self) -> int:
        """Bytes read so far (all of them, not only those kept)."""
        return self._tail.total

    async def drained(self, within: float) -> bool:
        """Wait up to ``within`` seconds for EOF (every holder of the pipe closed it)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within):
                await asyncio.shield(self._pump)
        return self._pump.done()

    async def kept(self) -> tuple[str, str | None]:
        """The kept output (its last ``limit`` bytes) and, when there was more, its longer tail,
        once the pipe is at EOF or after a short wait (a descendant that escaped the process
        group may hold the pipe open forever)."""
        await self.drained(_DRAIN_S)
        longer = self._tail.total > self._limit and len(self._tail.data) > self._limit
        return self._tail.text(self._limit), self._tail.text() if longer else None

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


def _kill_now(proc: _Guarded) -> None:
    """SIGKILL what is left of the attempt's process group."""
    if proc.returncode is None or _group_alive(proc.pid):
        _signal_group(proc.pid, signal.SIGKILL)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    """Whether process group ``pgid`` still has a member: one ``kill(-pgid, 0)``.

    A zombie is still a member, but none lingers here: the attempt's guard is the child
    subreaper of the program's descendants (:mod:`.guard`) and reaps each one as it exits, so
    the group is empty as soon as its last process is gone, even where pid 1 reaps nothing.
    (Where the guard cannot be a subreaper, not Linux, an orphan that exited stays a member until
    whoever adopted it reaps it; ending the group then waits out the grace.) This runs every
    ``_POLL_S`` while a group is being ended, so it probes the group with one signal rather than
    reading ``/proc/*/stat`` of every process on the machine each time."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member we may not signal (it changed its user): still a member
        return True
    return True


def _start_error(program: str, exc: OSError | ValueError) -> str:
    if isinstance(exc, FileNotFoundError):
        return f"executable not found: {program}"
    if isinstance(exc, PermissionError):
        return f"permission denied executing {program}"
    if isinstance(exc, OSError):
        return f"cannot start {program}: {exc.strerror or exc}"
    return f"cannot start {program}: {exc}"


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"killed by {name}"
    return f"exited with status {code}"
