"""Failpoints: named places where a test may make this process fail on purpose.

The chaos suite (``tests/chaos``) kills processes at chosen instants from outside, but some
instants are too narrow to hit that way: between a scheduler's store commit and its queue publish,
for example. ``CRONWHEEL_FAILPOINTS`` names such places::

    CRONWHEEL_FAILPOINTS="scheduler.after_commit=kill@3"    # SIGKILL itself on the 3rd pass there

``kill@N`` sends SIGKILL to this process on the N-th hit (no cleanup, no flush, as a power cut
would). ``raise@N`` raises :class:`FailpointError` there instead, for tests that stay in one
process: inside a store transaction it makes the transaction fail between two of its writes, as a
connection lost mid-transaction would (:func:`armed` arms them for a ``with`` block). The variable
is read once at import; unset (production) a hit is one dict lookup.

Places in the store (``cronwheel.store.sql``), each between two writes of one transaction:

* ``store.before_skipped_runs``: the job is written, its SKIPPED(paused) runs not yet
  (``resume_job``; ``record_skipped`` passes it too);
* ``store.before_cancel_flags``: the job is deleted or the firing recorded, the cancel flags of
  its runs not yet set (``delete_job``, ``fire``; ``request_cancel`` passes it too, and so does
  the deletion of a job by its run's success);
* ``store.before_success_delete``: a run's SUCCESS is written, the deletion of its job
  (``delete_after_success``) not yet (``finish_attempts``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Iterator

from cronwheel.errors import TransientError

log = logging.getLogger("cronwheel.failpoints")

_ACTIONS = ("kill", "raise")
_ARMED: dict[str, tuple[str, int]] = {}  # name -> (action, pass)
_HITS: dict[str, int] = {}


class FailpointError(TransientError):
    """Raised by a failpoint armed with ``raise``: an injected failure (transient, as the lost
    connection or crashed statement it stands for would be)."""


def arm(spec: str) -> None:
    """Arm failpoints from ``name=ACTION@N[,name=ACTION@N]`` with ACTION ``kill`` or ``raise``
    (replaces what was armed)."""
    armed: dict[str, tuple[str, int]] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, action = item.partition("=")
        kind, _, count = action.partition("@")
        if kind not in _ACTIONS or not count.isdigit() or int(count) < 1:
            raise ValueError(f"failpoint {item!r}: expected name=kill@N or name=raise@N with N >= 1")
        armed[name.strip()] = (kind, int(count))
    _ARMED.clear()
    _HITS.clear()
    _ARMED.update(armed)


@contextlib.contextmanager
def armed(spec: str) -> Iterator[None]:
    """Arm ``spec`` for the ``with`` block, then disarm everything (tests)."""
    arm(spec)
    try:
        yield
    finally:
        arm("")


def hit(name: str) -> None:
    """Pass a failpoint: fail here if it is armed and this is the chosen pass."""
    if not _ARMED or name not in _ARMED:
        return
    action, count = _ARMED[name]
    _HITS[name] = _HITS.get(name, 0) + 1
    if _HITS[name] != count:
        return
    log.warning("failpoint", extra={"action": "failpoint", "failpoint": name})
    if action == "raise":
        raise FailpointError(f"failpoint {name} (pass {count})")
    for handler in logging.getLogger().handlers:
        handler.flush()
    os.kill(os.getpid(), signal.SIGKILL)


arm(os.environ.get("CRONWHEEL_FAILPOINTS", ""))
