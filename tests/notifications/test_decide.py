"""The decision is a pure function of (previous state, new state, rule): once per transition."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from cronwheel.model import RunKind, RunState
from cronwheel.notifications.decide import OUTCOME, events, missed_aspect, run_health
from cronwheel.notifications.rules import Condition, Event, Rule, SlackChannel

SLOT = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
CHANNELS = (SlackChannel("https://hooks.example.com/x"),)
EVERYTHING = Rule(frozenset(Condition), CHANNELS, deadline_s=60, late_s=30)


def _replay(outcomes: list[RunState], rule: Rule) -> list[Event]:
    state: dict[str, str] = {}
    found: list[Event] = []
    for outcome in outcomes:
        new = run_health(outcome, RunKind.SCHEDULED, SLOT, SLOT, (rule,))
        found += events(state, new, rule)
        state.update(new)
    return found


@given(st.lists(st.sampled_from([RunState.SUCCESS, RunState.FAILED, RunState.SKIPPED]), max_size=40))
def test_one_failure_per_streak_and_one_recovery_after_each(outcomes: list[RunState]) -> None:
    decided = [o for o in outcomes if o is not RunState.SKIPPED]  # a skipped slot changes no outcome
    streaks = sum(
        1
        for i, o in enumerate(decided)
        if o is RunState.FAILED and (i == 0 or decided[i - 1] is RunState.SUCCESS)
    )
    recoveries = sum(
        1
        for i, o in enumerate(decided)
        if o is RunState.SUCCESS and i > 0 and decided[i - 1] is RunState.FAILED
    )
    found = _replay(outcomes, EVERYTHING)
    assert found.count(Event.FAILURE) == streaks
    assert found.count(Event.RECOVERY) == recoveries
    only_failure = Rule(frozenset({Condition.FAILURE}), CHANNELS)
    assert _replay(outcomes, only_failure) == [Event.FAILURE] * streaks


def test_a_first_success_is_no_recovery_and_change_means_both_directions() -> None:
    change = Rule(frozenset({Condition.CHANGE}), CHANNELS)
    assert events({}, {OUTCOME: "success"}, change) == ()
    assert events({}, {OUTCOME: "failure"}, change) == (Event.FAILURE,)
    assert events({OUTCOME: "failure"}, {OUTCOME: "success"}, change) == (Event.RECOVERY,)
    assert events({OUTCOME: "failure"}, {OUTCOME: "failure"}, change) == ()


def test_lateness_against_the_rules_threshold_and_only_for_queued_scheduled_runs() -> None:
    late = run_health(RunState.SUCCESS, RunKind.SCHEDULED, SLOT, SLOT + timedelta(seconds=31), (EVERYTHING,))
    assert events({}, late, EVERYTHING) == (Event.LATE,)
    assert events(late, late, EVERYTHING) == ()
    on_time = run_health(
        RunState.SUCCESS, RunKind.SCHEDULED, SLOT, SLOT + timedelta(seconds=30), (EVERYTHING,)
    )
    assert events(late, on_time, EVERYTHING) == ()
    assert run_health(RunState.FAILED, RunKind.MANUAL, SLOT, SLOT + timedelta(hours=1), (EVERYTHING,)) == {
        OUTCOME: "failure"
    }


def test_missed_then_back() -> None:
    aspect = missed_aspect(EVERYTHING)
    assert events({}, {aspect: "missed"}, EVERYTHING) == (Event.MISSED,)
    assert events({aspect: "missed"}, {aspect: "missed"}, EVERYTHING) == ()
    assert events({aspect: "missed"}, {aspect: "ok"}, EVERYTHING) == (Event.BACK,)
    assert events({}, {aspect: "ok"}, EVERYTHING) == ()
    failure_only = Rule(frozenset({Condition.FAILURE}), CHANNELS, deadline_s=60)
    assert events({}, {aspect: "missed"}, failure_only) == ()
