"""``Holding``: triggers received ahead of their slot, held until it (pure: the caller says when)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from cronwheel.queue import Delivery, Trigger
from cronwheel.worker.holding import Holding

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def delivery(run_id: str, slot_s: float | None) -> Delivery:
    slot = None if slot_s is None else T0 + timedelta(seconds=slot_s)
    return Delivery(Trigger(run_id, "job", slot=slot), f"token-{run_id}")


def test_only_triggers_ahead_of_their_slot_are_held() -> None:
    holding = Holding(10)
    given = [delivery("late", -1), delivery("plain", None), delivery("now", 0), delivery("ahead", 0.3)]
    due = holding.hold_early(given, T0)
    assert [d.trigger.run_id for d in due] == ["late", "plain", "now"]
    assert (len(holding), holding.room(), holding.next_at()) == (1, 9, T0 + timedelta(seconds=0.3))


def test_held_triggers_come_out_at_their_slot_earliest_first() -> None:
    holding = Holding(10)
    holding.hold_early([delivery("b", 0.5), delivery("a", 0.2), delivery("c", 0.5), delivery("d", 0.9)], T0)
    assert holding.pop_due(T0 + timedelta(seconds=0.2) - timedelta(microseconds=1)) == []
    assert [d.trigger.run_id for d in holding.pop_due(T0 + timedelta(seconds=0.5))] == ["a", "b", "c"]
    assert holding.next_at() == T0 + timedelta(seconds=0.9)
    assert [d.trigger.run_id for d in holding.pop_due(T0 + timedelta(seconds=5))] == ["d"]
    assert (len(holding), holding.next_at(), holding.room()) == (0, None, 10)


def test_room_says_how_many_more_may_be_held() -> None:
    holding = Holding(2)
    holding.hold_early([delivery("a", 1), delivery("b", 2)], T0)
    assert holding.room() == 0
    holding.pop_due(T0 + timedelta(seconds=1))
    assert holding.room() == 1
