"""The timing wheel: add, move, remove, drain in order."""

from __future__ import annotations

from cronwheel.scheduler.wheel import TimingWheel

Entry = tuple[str, int]  # (key, due second)


def wheel_of() -> TimingWheel[Entry]:
    return TimingWheel(lambda entry: entry[1])


def put(wheel: TimingWheel[Entry], key: str, due: int) -> None:
    wheel.add(key, (key, due))


def keys(entries: list[Entry]) -> list[str]:
    return sorted(key for key, _ in entries)


def test_drains_everything_due_and_nothing_else() -> None:
    wheel = wheel_of()
    put(wheel, "a", 100)
    put(wheel, "b", 101)
    put(wheel, "c", 100)
    put(wheel, "d", 200)
    assert wheel.next_due() == 100
    assert keys(wheel.pop_due(101)) == ["a", "b", "c"]
    assert wheel.pop_due(199) == []
    assert wheel.next_due() == 200
    assert len(wheel) == 1
    assert dict(wheel.entries) == {"d": ("d", 200)}


def test_moving_and_removing() -> None:
    wheel = wheel_of()
    put(wheel, "a", 100)
    put(wheel, "a", 150)  # moved, not duplicated
    assert wheel.pop_due(120) == []
    assert "a" in wheel
    assert wheel.remove("a") == ("a", 150)
    assert "a" not in wheel
    assert wheel.remove("a") is None
    assert wheel.pop_due(1000) == []
    assert wheel.next_due() is None


def test_re_adding_an_emptied_second() -> None:
    wheel = wheel_of()
    put(wheel, "a", 100)
    wheel.remove("a")
    put(wheel, "b", 100)
    put(wheel, "c", 100)
    assert keys(wheel.pop_due(100)) == ["b", "c"]
    assert wheel.pop_due(100) == []


def test_many_timers() -> None:
    wheel = wheel_of()
    for index in range(10_000):
        put(wheel, f"job-{index}", index % 300)
    drained: list[Entry] = []
    for second in range(300):
        drained.extend(wheel.pop_due(second))
    assert len(drained) == 10_000
    assert len(set(drained)) == 10_000
    assert len(wheel) == 0
