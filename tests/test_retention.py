"""The pure decision of what run history may go (cronwheel.retention)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from cronwheel.model import RetentionPolicy, RunState
from cronwheel.retention import HistoryBounds, RunStub, bounds_of, decide, effective, purgeable

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def history(*states: RunState, step: timedelta = HOUR) -> list[RunStub]:
    """Runs one ``step`` apart, the last one ``step`` before NOW; ids r0, r1 ... oldest first."""
    count = len(states)
    return [RunStub(f"r{i}", NOW - (count - i) * step, state) for i, state in enumerate(states)]


S, F, K, P, R = RunState.SUCCESS, RunState.FAILED, RunState.SKIPPED, RunState.PENDING, RunState.RUNNING


def test_no_policy_keeps_everything() -> None:
    assert decide(history(S, S, S), None, NOW) == set()
    assert effective(None, None) is None
    assert effective(RetentionPolicy(), RetentionPolicy(keep_days=3)) is None  # nothing limited


def test_the_jobs_own_policy_wins_over_the_default() -> None:
    own, default = RetentionPolicy(keep_runs=5), RetentionPolicy(keep_days=30)
    assert effective(own, default) is own
    assert effective(None, default) is default


def test_keep_runs_keeps_the_newest_and_the_latest_of_each_state() -> None:
    runs = history(F, S, K, S, S, S, S)
    # the newest 2 stay (r5, r6); r0 is the latest FAILED and r2 the latest SKIPPED: they stay too
    assert decide(runs, RetentionPolicy(keep_runs=2), NOW) == {"r1", "r3", "r4"}


def test_keep_days_removes_what_is_older() -> None:
    runs = history(S, S, S, S, step=timedelta(days=1))  # 4, 3, 2 and 1 days ago
    assert decide(runs, RetentionPolicy(keep_days=2), NOW) == {"r0", "r1"}


def test_both_limits_each_remove() -> None:
    runs = history(S, S, S, S, S, S, step=timedelta(days=1))  # 6 ... 1 days ago
    assert decide(runs, RetentionPolicy(keep_days=5, keep_runs=3), NOW) == {"r0", "r1", "r2"}  # by count
    assert decide(runs, RetentionPolicy(keep_days=4, keep_runs=5), NOW) == {"r0", "r1"}  # by age


def test_a_run_that_is_not_terminal_never_goes() -> None:
    runs = history(P, R, RunState.RETRYING, S, S)
    assert decide(runs, RetentionPolicy(keep_runs=1), NOW) == {"r3"}


def test_a_page_stops_at_the_first_run_both_limits_keep() -> None:
    runs = history(S, S, S, S)
    policy = RetentionPolicy(keep_runs=2)
    bounds = bounds_of(runs, policy)
    assert purgeable(runs[:1], policy, NOW, bounds) == (["r0"], False)  # more may follow
    assert purgeable(runs, policy, NOW, bounds) == (["r0", "r1"], True)


def test_fewer_runs_than_kept_have_no_count_bound() -> None:
    bounds = bounds_of(history(S, F), RetentionPolicy(keep_runs=3))
    assert bounds == HistoryBounds(None, frozenset({"r0", "r1"}))


def _reference(runs: list[RunStub], policy: RetentionPolicy) -> set[str]:
    """The rules as the docs state them, written the plain way."""
    newest_first = sorted(runs, key=lambda run: run.key, reverse=True)
    latest = {state: next((r.id for r in newest_first if r.state is state), None) for state in RunState}
    going = set()
    for rank, run in enumerate(newest_first):
        old = policy.keep_days is not None and run.slot < NOW - timedelta(days=policy.keep_days)
        beyond = policy.keep_runs is not None and rank >= policy.keep_runs
        if (old or beyond) and run.state.terminal and latest[run.state] != run.id:
            going.add(run.id)
    return going


@pytest.mark.parametrize("seed", range(200))
def test_decide_agrees_with_the_plain_rules(seed: int) -> None:
    rng = random.Random(seed)
    runs = [
        RunStub(f"r{i}", NOW - timedelta(hours=rng.randrange(0, 24 * 10)), rng.choice(list(RunState)))
        for i in range(rng.randrange(0, 40))
    ]
    policy = RetentionPolicy(keep_days=rng.choice([None, 1, 3, 7]), keep_runs=rng.choice([None, 1, 5, 20]))
    assert decide(runs, effective(policy, None), NOW) == _reference(runs, policy)
