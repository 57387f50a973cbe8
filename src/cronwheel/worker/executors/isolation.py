"""What a command attempt runs as and within: its user and group, its resource limits, and the
directory it starts in.

A command target runs a program on the worker's machine for some team. Run as the worker's own
user it could read everything the worker can: the database with every team's jobs, headers,
environments and tokens (a ``grep`` job printed other teams' tokens). So:

* **User and group.** With ``--command-user`` (and ``--command-group``, else the user's primary
  group) the attempt's guard process (:mod:`.guard`) drops to them in the forked child, before
  ``exec``: ``setgroups([gid])``, ``setresgid``, ``setresuid``, so the program has no way back.
  That needs a worker running as root; a worker that is not root can run commands only as
  itself, and one asked for another user refuses to start. A root worker given no user runs
  commands as ``nobody`` (:func:`default_user`), never as root unless told ``--command-user root``.
  ``HOME``, ``USER`` and ``LOGNAME`` are the command user's.
* **Resource limits** (``setrlimit``, soft and hard, so the program cannot raise them): CPU
  seconds, address space, open files, processes of the user, file size; :class:`CommandLimits`
  has the defaults and ``--command-limit NAME=VALUE`` changes them. A limit is never set above
  the hard limit the worker itself has.
* **Working directory.** A target without ``cwd`` starts in :attr:`CommandIsolation.cwd` (``/``
  by default), not in the worker's own directory, which is often the data directory.

Not isolated (no namespaces, no containers): the program sees the machine's file system with
the command user's rights, its network, and its other processes; it can use the CPU and memory
its limits allow. Put the worker in a container or a VM to contain more.
"""

from __future__ import annotations

import grp
import os
import pwd
import resource
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from cronwheel.errors import InvalidInputError
from cronwheel.settings import WORKER, option

AUTO = -2
"""``CommandLimits.processes`` by default: 512 under a command user of its own, none when the
commands share the worker's user (RLIMIT_NPROC counts every process and thread of the user,
the worker's included)."""

_AUTO_PROCESSES = 512
_WORKER = frozenset({WORKER})  # the --command-* options are a worker's
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}

LIMIT_NAMES: Mapping[str, tuple[str, int]] = {  # --command-limit NAME -> (CommandLimits field, resource)
    "cpu": ("cpu_s", resource.RLIMIT_CPU),
    "as": ("address_space_bytes", resource.RLIMIT_AS),
    "nofile": ("open_files", resource.RLIMIT_NOFILE),
    "nproc": ("processes", resource.RLIMIT_NPROC),
    "fsize": ("file_size_bytes", resource.RLIMIT_FSIZE),
}


@dataclass(frozen=True, slots=True)
class CommandLimits:
    """``setrlimit`` values for every command (None: not limited)."""

    cpu_s: int | None = 3600  # RLIMIT_CPU: CPU seconds of one process (then SIGKILL)
    address_space_bytes: int | None = 8 * 1024**3  # RLIMIT_AS: virtual memory of one process
    open_files: int | None = 1024  # RLIMIT_NOFILE
    processes: int | None = AUTO  # RLIMIT_NPROC: processes and threads of the command user
    file_size_bytes: int | None = 1024**3  # RLIMIT_FSIZE: largest file it may write (SIGXFSZ)

    @classmethod
    def parse(cls, items: Iterable[str]) -> CommandLimits:
        """``["cpu=600", "as=2G", "nproc=unlimited"]`` over the defaults; anything else is refused
        (InvalidInputError)."""
        values: dict[str, int | None] = {}
        for item in items:
            name, sep, text = item.partition("=")
            if not sep or name not in LIMIT_NAMES:
                known = ", ".join(LIMIT_NAMES)
                raise InvalidInputError(
                    f"--command-limit {item!r}: expected NAME=VALUE with NAME one of {known}"
                )
            values[LIMIT_NAMES[name][0]] = _amount(item, text)
        return cls(**values)

    def rlimits(self, own_user: bool) -> list[tuple[int, int]]:
        """(resource, value) pairs to set; ``own_user``: the commands run as a user of their own."""
        pairs = []
        for field_name, number in LIMIT_NAMES.values():
            value = getattr(self, field_name)
            if value == AUTO:
                value = _AUTO_PROCESSES if own_user else None
            if value is not None:
                pairs.append((number, value))
        return pairs


def _amount(item: str, text: str) -> int | None:
    text = text.strip()
    if text.lower() in ("unlimited", "none", "infinity"):
        return None
    number, unit = (text[:-1], text[-1].upper()) if text[-1:].isalpha() else (text, "")
    if unit not in _UNITS or not number.isdigit() or int(number) <= 0:
        raise InvalidInputError(
            f"--command-limit {item!r}: the value must be a positive whole number (with K, M, G or T "
            "for sizes) or 'unlimited'"
        )
    return int(number) * _UNITS[unit]


@dataclass(frozen=True, slots=True)
class Identity:
    """The user a command runs as, resolved once when the worker starts."""

    uid: int
    gid: int
    name: str
    home: str

    def environment(self) -> dict[str, str]:
        return {"HOME": self.home, "USER": self.name, "LOGNAME": self.name}


@dataclass(frozen=True, slots=True)
class CommandIsolation:
    """The operator's choices for commands (``--command-user``, ``--command-group``,
    ``--command-limit``, ``--command-cwd``)."""

    user: str | None = field(  # a name or uid; None: the worker's own user
        default=None,
        metadata=option(
            "--command-user",
            "Run command targets as this user (needs root). Default: nobody when running as root, "
            "else this process's user.",
            roles=_WORKER,
            metavar="USER",
        ),
    )
    group: str | None = field(  # a name or gid; None: the user's primary group
        default=None,
        metadata=option(
            "--command-group",
            "Run command targets with this group. Default: the command user's primary group.",
            roles=_WORKER,
            metavar="GROUP",
        ),
    )
    limits: CommandLimits = field(  # given as NAME=VALUE items (CommandLimits.parse)
        default_factory=CommandLimits,
        metadata=option(
            "--command-limit",
            "A resource limit of every command: cpu (s), as, fsize (bytes, K/M/G), nofile, nproc; "
            "'unlimited' lifts one. Defaults: cpu=3600 as=8G nofile=1024 fsize=1G nproc=512 (for a "
            "command user of its own).",
            roles=_WORKER,
            metavar="NAME=VALUE",
            multiple=True,
        ),
    )
    cwd: str = field(
        default="/",
        metadata=option(
            "--command-cwd", "Where a command target without cwd starts.", roles=_WORKER, metavar="DIR"
        ),
    )

    def identity(self) -> Identity | None:
        """The user to switch to (None: stay the worker's user), or InvalidInputError when the
        user or group does not exist, or this process may not become them."""
        if not os.path.isabs(self.cwd):
            raise InvalidInputError(f"--command-cwd must be an absolute path, not {self.cwd!r}")
        if self.user is None and self.group is None:
            return None
        entry = _user(self.user) if self.user is not None else pwd.getpwuid(os.geteuid())
        gid = entry.pw_gid if self.group is None else _group(self.group)
        identity = Identity(entry.pw_uid, gid, entry.pw_name, entry.pw_dir or "/")
        if os.geteuid() != 0 and (identity.uid != os.geteuid() or identity.gid != os.getegid()):
            raise InvalidInputError(
                f"--command-user {identity.name} needs a worker running as root (this one runs as uid "
                f"{os.geteuid()}): only root can start programs as another user"
            )
        return identity

    def defaulted(self, allow_commands: bool) -> CommandIsolation:
        """These choices with the user :func:`default_user` gives when none was."""
        return replace(self, user=default_user(allow_commands, self.user))

    def guard_setup(self, identity: Identity | None) -> tuple[int, int, list[tuple[int, int]]]:
        """What the guard applies in the child before exec: uid, gid (-1: unchanged), limits."""
        own = identity is not None and identity.uid != os.geteuid()
        limits = self.limits.rlimits(own_user=own)
        if identity is None or (identity.uid, identity.gid) == (os.geteuid(), os.getegid()):
            return -1, -1, limits  # nothing to switch (and setgroups would need root)
        return identity.uid, identity.gid, limits


def default_user(allow_commands: bool, user: str | None) -> str | None:
    """``--command-user`` when it is not given: ``nobody`` for a worker running as root (commands
    never run as root unless asked), else the worker's own user (None)."""
    if user is None and allow_commands and os.geteuid() == 0:
        return "nobody"
    return user


def _user(text: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwuid(int(text)) if text.isdigit() else pwd.getpwnam(text)
    except KeyError:
        raise InvalidInputError(f"--command-user {text!r}: no such user on this machine") from None


def _group(text: str) -> int:
    try:
        return grp.getgrgid(int(text)).gr_gid if text.isdigit() else grp.getgrnam(text).gr_gid
    except KeyError:
        raise InvalidInputError(f"--command-group {text!r}: no such group on this machine") from None
