"""The timing wheel: add, move, remove, drain in order."""

from __future__ import annotations

from cronwheel.scheduler.wheel import TimingWheel


def test_drains_everything_due_and_nothing_else() -> None:
    wheel = TimingWheel()
    wheel.add("a", 100)
    wheel.add("b", 101)
    wheel.add("c", 100)
    wheel.add("d", 200)
    assert wheel.next_due() == 100
    assert sorted(wheel.pop_due(101)) == ["a", "b", "c"]
    assert wheel.pop_due(199) == []
    assert wheel.next_due() == 200
    assert len(wheel) == 1


def test_moving_and_removing() -> None:
    wheel = TimingWheel()
    wheel.add("a", 100)
    wheel.add("a", 150)  # moved, not duplicated
    assert wheel.pop_due(120) == []
    assert "a" in wheel
    wheel.remove("a")
    assert "a" not in wheel
    assert wheel.pop_due(1000) == []
    assert wheel.next_due() is None


def test_re_adding_an_emptied_second() -> None:
    wheel = TimingWheel()
    wheel.add("a", 100)
    wheel.remove("a")
    wheel.add("b", 100)
    wheel.add("c", 100)
    assert sorted(wheel.pop_due(100)) == ["b", "c"]
    assert wheel.pop_due(100) == []


def test_many_timers() -> None:
    wheel = TimingWheel()
    for index in range(10_000):
        wheel.add(f"job-{index}", index % 300)
    drained = []
    for second in range(300):
        drained.extend(wheel.pop_due(second))
    assert len(drained) == 10_000
    assert len(set(drained)) == 10_000
