"""The guard of one command attempt: a tiny process between the worker and the program that ends
the program's whole process group as soon as the worker is gone, however it went (``kill -9``
included), so the retry of the run, which carries the same execution id, never overlaps it.

How: the worker makes a socket pair and starts ``python -I -S`` running :func:`main` (see
:data:`BOOTSTRAP`) with one end inherited, in its own session, with the attempt's stdin and
output pipe as its stdio; the worker keeps the other end, and nothing else holds it. The guard
reads the program's argv, environment and setup from the socket, forks, and the child
``setsid()``\\ s (so the program leads its own session and process group, as before), sets the
attempt's resource limits, drops to the command user and group when there is one
(:mod:`.isolation`: the guard stays root, so it can still end the group) and execs the
program. The guard reports the program's pid (or the exec's errno), then waits for two things at
once: its children's exits (SIGCHLD, turned into a byte on a pipe by ``signal.set_wakeup_fd``;
the program's exit it reports with the exit code), and the socket. ``DONE`` from the worker means
the attempt is over and the worker has dealt with the group; end of file means the worker is
gone, and the guard SIGKILLs the program's process group at once (no one is left to wait out a
SIGTERM grace) and exits. The
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
  on it. The guard is that someone.
* cgroups contain even descendants that leave the group with ``setsid``, but need delegation the
  deployment must provide; this works for any unprivileged worker.

Cost: one small interpreter start per attempt (``-I -S``, importing only ``posix``, ``select``,
``errno`` and ``_signal``, which are built in or tiny). Measured on a shared, busy 2-core VM, median
of 50 attempts of ``true``, before and after in one session: 1.1-1.3 ms before, 16-17 ms with the
guard (about 15 ms more, and as much CPU, nearly all of it the interpreter's start).

The program is the guard's child, not the worker's, so its exit code travels over the socket; the
guard exits only after ``DONE`` (the worker has ended any leftovers) or the worker's death, so it
covers the attempt's whole life, the SIGTERM grace included.

**Subreaper.** Before forking, the guard makes itself the child subreaper of everything it starts
(``prctl(PR_SET_CHILD_SUBREAPER)``, Linux): a descendant orphaned by the program's exit (or by a
shell's subshell) becomes the guard's child instead of pid 1's, and the guard reaps every child
that exits. So no zombie lingers in the program's process group, even where pid 1 reaps nothing
(a container whose pid 1 is the worker, or an init that does not reap), and the worker can tell
whether the group still has a member with one ``kill(-pgid, 0)`` instead of reading the state of
every process in ``/proc``. ``prctl`` is called through ``_ctypes`` (about 0.5 ms to import;
``ctypes`` would cost 4-6 ms); without it (not Linux) the guard still works, and an orphan that
exits stays a member of the group until whoever adopted it reaps it.

Protocol (all integers big-endian): worker -> guard, once: a 4-byte length, then NUL-separated
items: the argv length in ASCII digits, the setup (uid, gid, then resource and value pairs, in
ASCII digits separated by spaces: :data:`Setup`), the argv, then ``KEY=VALUE`` environment
entries; later :data:`DONE`. Guard -> worker: 9-byte records, a tag (:data:`STARTED` pid,
:data:`FAILED` errno, :data:`EXITED` exit code, negative for a signal) and a signed 8-byte value.

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
_PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
_DEFAULT_PATH = b"/bin:/usr/bin"  # os.defpath, for an environment without PATH (as Popen does)


Setup = tuple[int, int, list[tuple[int, int]]]
"""What the child applies before exec: uid and gid to become (-1: unchanged), and (resource,
value) limits for ``setrlimit`` (:mod:`.isolation`)."""

NO_SETUP: Setup = (-1, -1, [])


def encode_spec(argv: list[bytes], env: dict[bytes, bytes], setup: Setup = NO_SETUP) -> bytes:
    """The worker's message: what to run (items must not contain NUL; keys must not contain =)."""
    uid, gid, limits = setup
    numbers = [uid, gid, *(number for pair in limits for number in pair)]
    header = [str(len(argv)).encode(), b" ".join(str(number).encode() for number in numbers)]
    items = [*header, *argv, *(key + b"=" + value for key, value in env.items())]
    body = b"\0".join(items)
    return len(body).to_bytes(4, "big") + body


def decode_spec(body: bytes) -> tuple[list[bytes], dict[bytes, bytes], Setup]:
    items = body.split(b"\0")
    count = int(items[0])
    numbers = [int(number) for number in items[1].split()]
    limits = list(zip(numbers[2::2], numbers[3::2], strict=True))
    argv = items[2 : 2 + count]
    env: dict[bytes, bytes] = {}
    for item in items[2 + count :]:
        key, _, value = item.partition(b"=")
        env[key] = value
    return argv, env, (numbers[0], numbers[1], limits)


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
    argv, env, setup = decode_spec(body)
    _become_subreaper()  # before the fork: no descendant can be orphaned past the guard
    pid = _start(channel, argv, env, setup)
    if pid is not None:
        _quiet()
        _watch(channel, pid, _child_exits())
    return 0


def _become_subreaper() -> bool:
    """``prctl(PR_SET_CHILD_SUBREAPER, 1)`` (Linux 3.4+), through ``_ctypes`` alone (``ctypes``
    costs milliseconds to import): orphaned descendants of the program become the guard's
    children, which it reaps (:func:`_reap`), instead of pid 1's, which may reap nothing."""
    try:
        import _ctypes  # noqa: PLC0415 (only here: a guard that cannot use it still works)

        c_int = type("c_int", (_ctypes._SimpleCData,), {"_type_": "i"})
        c_ulong = type("c_ulong", (_ctypes._SimpleCData,), {"_type_": "L"})
        signature = {
            "_flags_": _ctypes.FUNCFLAG_CDECL,
            "_restype_": c_int,
            "_argtypes_": (c_int, *[c_ulong] * 4),
        }
        function = type("prctl", (_ctypes.CFuncPtr,), signature)
        libc = _ctypes.dlopen(None)  # type: ignore[arg-type] # dlopen(NULL): the interpreter, linked to libc
        prctl = function(_ctypes.dlsym(libc, "prctl"))
    except (ImportError, OSError, AttributeError):  # no libffi, or no prctl (not Linux)
        return False
    return bool(prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)


def _child_exits() -> int:
    """A pipe that gets a byte whenever a child of the guard exits (SIGCHLD), for ``select``."""
    wake_r, wake_w = posix.pipe()
    posix.set_blocking(wake_r, False)
    posix.set_blocking(wake_w, False)
    _signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    _signal.signal(_signal.SIGCHLD, _on_child_exit)
    return wake_r


def _on_child_exit(number: int, frame: object) -> None:
    """Nothing to do here: the wakeup byte on the pipe is what counts."""


def _start(channel: int, argv: list[bytes], env: dict[bytes, bytes], setup: Setup) -> int | None:
    """Fork and exec the program; report STARTED with its pid, or FAILED with the errno."""
    report_r, report_w = posix.pipe()  # close-on-exec: end of file without a word = exec succeeded
    try:
        pid = posix.fork()
    except OSError as error:
        _send(channel, FAILED, error.errno or errno.EIO)
        return None
    if pid == 0:
        _child(argv, env, setup, report_w)  # never returns
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


def _child(argv: list[bytes], env: dict[bytes, bytes], setup: Setup, report: int) -> None:
    code = errno.EIO
    try:
        posix.setsid()  # its own session and process group, led by the program
        for number in (_signal.SIGPIPE, _signal.SIGXFSZ):  # Python ignores them; exec would keep that
            _signal.signal(number, _signal.SIG_DFL)
        _confine(setup)
        _exec(argv, env)
    except OSError as error:
        code = error.errno or code
    finally:
        try:
            posix.write(report, str(code).encode())
        finally:
            posix._exit(127)


def _confine(setup: Setup) -> None:
    """Limits first (lowering one needs no privilege; raising a hard one would), never above the
    hard limit the guard has; then the group list, the group and the user, real, effective and
    saved alike, so the program cannot take root back (:mod:`.isolation`)."""
    uid, gid, limits = setup
    if limits:
        import resource  # noqa: PLC0415 (about 0.5 ms: only when there are limits to set)

        for number, wanted in limits:
            hard = resource.getrlimit(number)[1]
            value = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
            resource.setrlimit(number, (value, value))
    if gid >= 0:
        posix.setgroups([gid])
        posix.setresgid(gid, gid, gid)
    if uid >= 0:
        posix.setresuid(uid, uid, uid)


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


def _watch(channel: int, pid: int, wake: int) -> None:
    """Report the program's exit, reap every descendant that exits, until the worker says DONE
    (or is gone: then end the group). ``wake`` is readable when a child exited."""
    exited = False
    while True:
        code = _reap(pid)  # first: a child may have exited before SIGCHLD was caught
        if code is not None:
            exited = True
            if not _send(channel, EXITED, code):
                _end_group(pid, exited=True)
                return
        ready = select.select([channel, wake], [], [])[0]
        if wake in ready:
            _drain(wake)
        if channel in ready:
            try:
                message = posix.read(channel, 64)
            except OSError:
                message = b""
            if not message or not exited:  # the worker is gone (or gives up on a live program)
                _end_group(pid, exited=exited)
            return


def _reap(pid: int) -> int | None:
    """Reap every child that exited: the program, and the orphans the guard adopted as their
    subreaper (so that none lingers as a zombie in the program's process group). Returns the
    program's exit code if it was among them."""
    code = None
    while True:
        try:
            done, status = posix.waitpid(-1, posix.WNOHANG)
        except ChildProcessError:  # no children left
            return code
        if done == 0:
            return code
        if done == pid:
            code = posix.waitstatus_to_exitcode(status)


def _drain(fd: int) -> None:
    try:
        while posix.read(fd, 512):
            pass
    except BlockingIOError:
        pass


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
