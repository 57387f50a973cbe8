"""When to notify: pure functions of (previous state, new state, rule). No I/O.

A job's notification state is a few *aspects*, each a short value kept in the store
(``notification_health``):

* ``outcome``: ``success`` or ``failure``, the job's last terminal outcome (no value yet counts as
  ``success``: a new job is healthy);
* ``late>S``: ``late`` or ``ok``, whether the last run fired more than ``S`` seconds after its slot
  (one aspect per threshold that a rule of the job uses);
* ``missed>S``: ``missed`` or ``ok``, whether the latest slot older than ``S`` seconds has no
  terminal run (the dead-man's switch; one aspect per deadline).

A notification is due when an aspect *changes* in the direction a rule asks for, so a job that
fails ten times in a row notifies ``failure`` once, and ``recovery`` once when it succeeds again.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from cronwheel.model import RunKind, RunState
from cronwheel.notifications.rules import Event, Rule

OUTCOME = "outcome"
Health = Mapping[str, str]  # aspect -> value


def late_aspect(rule: Rule) -> str:
    return f"late>{rule.late_s:g}"


def missed_aspect(rule: Rule) -> str:
    return f"missed>{rule.deadline_s:g}"


def run_health(
    state: RunState, kind: RunKind, slot: datetime, queued_at: datetime | None, rules: tuple[Rule, ...]
) -> dict[str, str]:
    """The aspects a terminal run sets: its outcome (SUCCESS or FAILED; a SKIPPED run sets
    none) and, for a scheduled run that was queued, its lateness against each rule's threshold."""
    health: dict[str, str] = {}
    if state is RunState.SUCCESS:
        health[OUTCOME] = "success"
    elif state is RunState.FAILED:
        health[OUTCOME] = "failure"
    if kind is RunKind.SCHEDULED and queued_at is not None:
        lateness = (queued_at - slot).total_seconds()
        for rule in rules:
            health[late_aspect(rule)] = "late" if lateness > rule.late_s else "ok"
    return health


def events(previous: Health, new: Health, rule: Rule) -> tuple[Event, ...]:
    """The events ``rule`` is notified of when the job's state goes from ``previous`` to ``new``
    (``new`` holds only the aspects just observed; the others did not change)."""
    found: list[Event] = []
    if OUTCOME in new:
        was_failing = previous.get(OUTCOME) == "failure"
        if new[OUTCOME] == "failure" and not was_failing:
            found.append(Event.FAILURE)
        elif new[OUTCOME] == "success" and was_failing:
            found.append(Event.RECOVERY)
    late = late_aspect(rule)
    if new.get(late) == "late" and previous.get(late) != "late":
        found.append(Event.LATE)
    missed = missed_aspect(rule)
    if missed in new:
        if new[missed] == "missed" and previous.get(missed) != "missed":
            found.append(Event.MISSED)
        elif new[missed] == "ok" and previous.get(missed) == "missed":
            found.append(Event.BACK)
    return tuple(event for event in found if rule.wants(event))
