"""What of a job's run history may go: the pure decision of the purge.

A job's retention policy (:class:`~cronwheel.model.RetentionPolicy`, or the server's default when
the job has none) sets two limits, each optional: ``keep_days`` (a run whose slot is older goes)
and ``keep_runs`` (runs beyond the job's newest ``keep_runs`` go). A run goes when either limit
says so, and never when:

* it is not terminal (PENDING, RUNNING, RETRYING: a worker or the sweep still needs it), or
* it is its job's latest run of its state (the last SUCCESS, FAILED and SKIPPED stay, however
  old: "when did this last succeed?" keeps an answer).

The store reads a job's history oldest first, a page at a time (:meth:`Store.oldest_runs`), with
its :class:`HistoryBounds`; :func:`purgeable` says which runs of the page go and whether a newer
page could hold more. :func:`decide` applies the same rules to a whole history at once: the
reference the tests hold the store and the purge loop to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from cronwheel.model import RetentionPolicy, RunState

DAY = timedelta(days=1)


@dataclass(frozen=True, slots=True)
class RunStub:
    """What the purge needs of a run: its key (slot, id) in its job's history, and its state."""

    id: str
    slot: datetime
    state: RunState

    @property
    def key(self) -> tuple[datetime, str]:
        return (self.slot, self.id)


@dataclass(frozen=True, slots=True)
class HistoryBounds:
    """What the store says of one job's whole history: the key of its ``keep_runs``-th newest run
    (None: it has fewer runs, or no count limit), and the ids of its latest run of each
    terminal state (which never go)."""

    nth_newest: tuple[datetime, str] | None = None
    latest: frozenset[str] = frozenset()


def effective(policy: RetentionPolicy | None, default: RetentionPolicy | None) -> RetentionPolicy | None:
    """The policy that applies to a job: its own, else the server's default; None when that one
    limits nothing (the history is kept whole: a job's ``{}`` opts out of the default)."""
    chosen = policy if policy is not None else default
    if chosen is None or (chosen.keep_days is None and chosen.keep_runs is None):
        return None
    return chosen


def cutoff(policy: RetentionPolicy, now: datetime) -> datetime | None:
    """Runs whose slot is before this instant are older than ``keep_days`` (None: no age limit)."""
    return None if policy.keep_days is None else now - policy.keep_days * DAY


def _too_old(run: RunStub, before: datetime | None) -> bool:
    return before is not None and run.slot < before


def _beyond_count(run: RunStub, bounds: HistoryBounds) -> bool:
    return bounds.nth_newest is not None and run.key < bounds.nth_newest


def purgeable(
    page: Sequence[RunStub], policy: RetentionPolicy, now: datetime, bounds: HistoryBounds
) -> tuple[list[str], bool]:
    """The ids of ``page`` (one job's runs, oldest first) that may go, and whether the job is
    done: a run within both limits was reached, so every newer run is kept too."""
    before = cutoff(policy, now)
    going: list[str] = []
    for run in page:
        expired = _too_old(run, before) or _beyond_count(run, bounds)
        if not expired:
            return going, True
        if run.state.terminal and run.id not in bounds.latest:
            going.append(run.id)
    return going, False


def bounds_of(history: Sequence[RunStub], policy: RetentionPolicy) -> HistoryBounds:
    """The :class:`HistoryBounds` of a whole history (any order), as the store computes them."""
    newest_first = sorted(history, key=lambda run: run.key, reverse=True)
    nth = None
    if policy.keep_runs is not None and len(newest_first) >= policy.keep_runs:
        nth = newest_first[policy.keep_runs - 1].key
    latest: dict[RunState, str] = {}
    for run in newest_first:
        if run.state.terminal:
            latest.setdefault(run.state, run.id)
    return HistoryBounds(nth, frozenset(latest.values()))


def decide(history: Sequence[RunStub], policy: RetentionPolicy | None, now: datetime) -> set[str]:
    """The ids of a whole history that may go under ``policy`` (the effective one) at ``now``."""
    if policy is None:
        return set()
    going, _ = purgeable(sorted(history, key=lambda run: run.key), policy, now, bounds_of(history, policy))
    return set(going)
