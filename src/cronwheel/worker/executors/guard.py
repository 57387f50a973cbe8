"""The guard of one command attempt: a tiny process between the worker and the program that ends
the program's whole process group as soon as the worker is gone, however it went (``kill -9``
included), so the retry of the run, which carries the same execution id, never overlaps it.

How: the worker makes a socket pair and starts ``python -I -S`` running :func:`main` (see
:data:`BOOTSTRAP`) with one end inherited, in its own session, with the attempt's stdin and
output pipe as its stdio; the worker keeps the other end, and nothing else holds it. The guard
reads the program's argv and environment from the socket, forks, and the child
``setsid()``\\ s (so the program leads its own session and process group, as before) and execs the
program. The guard reports the program's pid (or the exec's errno), then waits for two things at
once: the program's exit (a pidfd; a 50 ms ``waitpid`` poll where there is none), which it reports
with the exit code, and the socket. ``DONE`` from the worker means the attempt is over and the
worker has dealt with the group; end of file means the worker is gone, and the guard SIGKILLs the
program's process group at once (no one is left to wait out a SIGTERM grace) and exits. The
worker's end of the socket is closed by the kernel when the worker process dies, whatever killed
it, so the group goes within milliseconds of the worker.

Why this and not the alternatives:

* ``prctl(PR_SET_PDEATHSIG)`` on the program: the signal fires when the *thread* that forked it
  exits, not the process (asyncio forks from the event loop's thread), it reaches only the direct
  child and not the grandchildren in its group, setting it needs ``preexec_fn`` (unsafe in a
  threaded process, and it turns off ``vfork``) and has a race with a parent that died before the
  call. The socket has none of these: it exists before the guard is forked, so there is no moment
  at which the worker could die unnoticed, and its end of file is per process.
* One long-lived reaper per worker: it would learn a new group's id only after the worker forked
  it, so a ``kill -9`` in between would leak that group; forking the programs itself (a fork
  server) closes that gap but makes every attempt depend on one shared helper and one protocol
  for fds, exit codes and restarts. A guard per attempt keeps each attempt independent.
* pidfd alone: a pidfd lets a live process watch another; someone must outlive the worker to act
  on it. The guard is that someone (and uses a pidfd to watch the program).
* cgroups contain even descendants that leave the group with ``setsid``, but need delegation the
  deployment must provide; this works for any unprivileged worker.

Cost: one small interpreter start per attempt (``-I -S``, importing only ``posix``, ``select``,
``errno`` and ``_signal``, which are built in or tiny). Measured on a shared, busy 2-core VM, median
of 50 attempts of ``true``, before and after in one session: 1.1-1.3 ms before, 16-17 ms with the
guard (about 15 ms more, and as much CPU, nearly all of it the interpreter's start).

The program is the guard's child, not the worker's, so its exit code travels over the socket; the
guard exits only after ``DONE`` (the worker has ended any leftovers) or the worker's death, so it
covers the attempt's whole life, the SIGTERM grace included.

Protocol (all integers big-endian): worker -> guard, once: a 4-byte length, then NUL-separated
items: the argv length in ASCII digits, the argv, then ``KEY=VALUE`` environment entries; later
:data:`DONE`. Guard -> worker: 9-byte records, a tag (:data:`STARTED` pid, :data:`FAILED` errno,
:data:`EXITED` exit code, negative for a signal) and a signed 8-byte value.

This module runs on its own under ``-I -S``: it imports nothing from cronwheel, and not ``os``,
``signal`` or ``contextlib`` either (they cost more to import than everything else the guard
does). It is imported as a top-level module from its directory (appended to ``sys.path``, so the
standard library still comes first) rather than run as a script, so that its compiled ``.pyc`` is
used: compiling it at every start cost 4 ms.
"""

import errno
import posix
import select
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _signal
else:
    import _signal

# python -I -S -c BOOTSTRAP <directory of this file> <socket fd>
BOOTSTRAP = "import sys; sys.path.append(sys.argv[1]); import guard; sys.exit(guard.main(sys.argv[1:]))"
STARTED = b"P"
FAILED = b"E"
EXITED = b"X"
DONE = b"D"
RECORD_SIZE = 9
_POLL_S = 0.05  # without a pidfd: how often to look for the program's exit
_DEFAULT_PATH = b"/bin:/usr/bin"  # os.defpath, for an environment without PATH (as Popen does)


def encode_spec(argv: list[bytes], env: dict[bytes, bytes]) -> bytes:
    """The worker's message: what to run (items must not contain NUL; keys must not contain =)."""
    items = [str(len(argv)).encode(), *argv, *(key + b"=" + value for key, value in env.items())]
    body = b"\0".join(items)
    return len(body).to_bytes(4, "big") + body


def decode_spec(body: bytes) -> tuple[list[bytes], dict[bytes, bytes]]:
    items = body.split(b"\0")
    count = int(items[0])
    argv = items[1 : 1 + count]
    env: dict[bytes, bytes] = {}
    for item in items[1 + count :]:
        key, _, value = item.partition(b"=")
        env[key] = value
    return argv, env


def encode_record(tag: bytes, value: int) -> bytes:
    return tag + value.to_bytes(RECORD_SIZE - 1, "big", signed=True)


def decode_record(record: bytes) -> tuple[bytes, int]:
    return record[:1], int.from_bytes(record[1:], "big", signed=True)


# -- the guard process -----------------------------------------------------------------------------


def main(args: list[str]) -> int:
    """``args[1]``: the guard's end of the socket pair."""
    channel = int(args[1])
    posix.set_inheritable(channel, False)  # the program must not hold the worker's line
    size = _read_exactly(channel, 4)
    body = _read_exactly(channel, int.from_bytes(size, "big")) if size is not None else None
    if body is None:
        return 0  # the worker went away before saying what to run
    argv, env = decode_spec(body)
    pid = _start(channel, argv, env)
    if pid is not None:
        _quiet()
        _watch(channel, pid)
    return 0


def _start(channel: int, argv: list[bytes], env: dict[bytes, bytes]) -> int | None:
    """Fork and exec the program; report STARTED with its pid, or FAILED with the errno."""
    report_r, report_w = posix.pipe()  # close-on-exec: end of file without a word = exec succeeded
    try:
        pid = posix.fork()
    except OSError as error:
        _send(channel, FAILED, error.errno or errno.EIO)
        return None
    if pid == 0:
        _child(argv, env, report_w)  # never returns
    posix.close(report_w)
    report = b""
    while chunk := posix.read(report_r, 64):
        report += chunk
    posix.close(report_r)
    if report:
        posix.waitpid(pid, 0)
        _send(channel, FAILED, int(report))
        return None
    if not _send(channel, STARTED, pid):
        _end_group(pid, exited=False)
        return None
    return pid


def _child(argv: list[bytes], env: dict[bytes, bytes], report: int) -> None:
    code = errno.EIO
    try:
        posix.setsid()  # its own session and process group, led by the program
        for number in (_signal.SIGPIPE, _signal.SIGXFSZ):  # Python ignores them; exec would keep that
            _signal.signal(number, _signal.SIG_DFL)
        _exec(argv, env)
    except OSError as error:
        code = error.errno or code
    finally:
        try:
            posix.write(report, str(code).encode())
        finally:
            posix._exit(127)


def _exec(argv: list[bytes], env: dict[bytes, bytes]) -> None:
    """execve along the environment's PATH as ``subprocess.Popen`` does: the first error other than
    "not there" wins, else the last one."""
    program = argv[0]
    if b"/" in program:
        posix.execve(program, argv, env)
    path = env.get(b"PATH")
    first: OSError | None = None
    last: OSError | None = None
    for directory in (_DEFAULT_PATH if path is None else path).split(b":"):
        candidate = directory.rstrip(b"/") + b"/" + program if directory else program
        try:
            posix.execve(candidate, argv, env)
        except OSError as error:
            last = error
            if first is None and error.errno not in (errno.ENOENT, errno.ENOTDIR):
                first = error
    raise first or last or OSError(errno.ENOENT, "no PATH to search")


def _quiet() -> None:
    """Let go of the attempt's stdin and output pipe: the worker reads the output to its end."""
    null = posix.open("/dev/null", posix.O_RDWR)
    for fd in (0, 1, 2):
        posix.dup2(null, fd)
    posix.close(null)


def _watch(channel: int, pid: int) -> None:
    try:
        pidfd = posix.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux 5.3+: poll
        pidfd = -1
    exited = False
    while True:
        watched = [channel] if exited or pidfd < 0 else [channel, pidfd]
        ready = select.select(watched, [], [], None if exited or pidfd >= 0 else _POLL_S)[0]
        if not exited and (pidfd < 0 or pidfd in ready):
            done, status = posix.waitpid(pid, posix.WNOHANG)
            if done:
                exited = True
                if pidfd >= 0:
                    posix.close(pidfd)
                    pidfd = -1
                if not _send(channel, EXITED, posix.waitstatus_to_exitcode(status)):
                    _end_group(pid, exited=True)
                    return
        if channel in ready:
            try:
                message = posix.read(channel, 64)
            except OSError:
                message = b""
            if not message or not exited:  # the worker is gone (or gives up on a live program)
                _end_group(pid, exited=exited)
            return


def _end_group(pid: int, *, exited: bool) -> None:
    try:  # noqa: SIM105 (contextlib would cost more to import than the guard's work)
        posix.killpg(pid, _signal.SIGKILL)
    except OSError:  # nothing left in the group
        pass
    if not exited:
        posix.waitpid(pid, 0)


def _send(channel: int, tag: bytes, value: int) -> bool:
    try:
        posix.write(channel, encode_record(tag, value))
    except OSError:
        return False
    return True


def _read_exactly(fd: int, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        try:
            chunk = posix.read(fd, size - len(data))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return data


if __name__ == "__main__":
    sys.exit(main(sys.argv))
