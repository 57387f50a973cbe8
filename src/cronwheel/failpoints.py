"""Failpoints: named places where a test may make this process crash on purpose.

The chaos suite (``tests/chaos``) kills processes at chosen instants from outside, but some
instants are too narrow to hit that way: between a scheduler's store commit and its queue publish,
for example. ``CRONWHEEL_FAILPOINTS`` names such places::

    CRONWHEEL_FAILPOINTS="scheduler.after_commit=kill@3"    # SIGKILL itself on the 3rd pass there

``kill@N`` sends SIGKILL to this process on the N-th hit (no cleanup, no flush, as a power cut
would). The variable is read once at import; unset (production) a hit is one dict lookup.
"""

from __future__ import annotations

import logging
import os
import signal

log = logging.getLogger("cronwheel.failpoints")

_ARMED: dict[str, int] = {}
_HITS: dict[str, int] = {}


def arm(spec: str) -> None:
    """Arm failpoints from ``name=kill@N[,name=kill@N]`` (replaces what was armed)."""
    _ARMED.clear()
    _HITS.clear()
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, action = item.partition("=")
        kind, _, count = action.partition("@")
        if kind != "kill" or not count.isdigit() or int(count) < 1:
            raise ValueError(f"failpoint {item!r}: expected name=kill@N with N >= 1")
        _ARMED[name.strip()] = int(count)


def hit(name: str) -> None:
    """Pass a failpoint: crash here if it is armed and this is the chosen pass."""
    if not _ARMED or name not in _ARMED:
        return
    _HITS[name] = _HITS.get(name, 0) + 1
    if _HITS[name] == _ARMED[name]:
        log.warning("failpoint", extra={"action": "failpoint", "failpoint": name})
        for handler in logging.getLogger().handlers:
            handler.flush()
        os.kill(os.getpid(), signal.SIGKILL)


arm(os.environ.get("CRONWHEEL_FAILPOINTS", ""))
