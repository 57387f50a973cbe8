"""Which refused requests (401, 403, 404 at a team's wall) the audit log records one by one: one
:class:`RefusalSampler` per API process, shared by REST and gRPC (``ApiServices.refusals``), so
that a flood over either protocol is bounded by one budget (:mod:`cronwheel.api.callers.auditing` writes
the entries it admits). Pure: time from the injected clock.
"""

from __future__ import annotations

from collections import OrderedDict

from prometheus_client import Counter

from cronwheel.clock import Monotonic
from cronwheel.telemetry import metrics

WINDOW = 60.0  # seconds: one entry per kind of refusal per window
BUDGET = 120  # refusal entries per window per api process, in all
MAX_KEYS = 10_000  # kinds of refusal remembered (the least recently recorded forgotten first)

COALESCED = Counter(
    "cronwheel_audit_refusals_coalesced_total",
    "Refused requests (401, 403, 404 at a team's wall) not written to the audit log one by one.",
    registry=metrics.REGISTRY,
)


class RefusalSampler:
    """Which refusals are written (the rules: :mod:`cronwheel.api.callers.auditing`), on monotonic time."""

    def __init__(
        self, clock: Monotonic, window: float = WINDOW, budget: int = BUDGET, max_keys: int = MAX_KEYS
    ) -> None:
        self.clock = clock
        self.window = window
        self.budget = budget
        self.max_keys = max_keys
        self._last: OrderedDict[tuple[str, ...], list[float]] = OrderedDict()  # key -> [at, alike since]
        self._window_start = clock.monotonic()
        self._used = 0

    def admit(self, key: tuple[str, ...]) -> int | None:
        """None: do not write this one (it is counted); else write it, standing for the returned
        number of refusals alike that were not written since the last one of ``key``."""
        now = self.clock.monotonic()
        if now - self._window_start >= self.window:
            self._window_start, self._used = now, 0
        last = self._last.get(key)
        if (last is not None and now - last[0] < self.window) or self._used >= self.budget:
            if last is not None:
                last[1] += 1
            COALESCED.inc()
            return None
        alike = 0 if last is None else int(last[1])
        self._last.pop(key, None)
        self._last[key] = [now, 0]
        self._used += 1
        while len(self._last) > self.max_keys:
            self._last.popitem(last=False)
        return alike
