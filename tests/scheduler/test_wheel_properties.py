"""The hierarchical wheel against a plain reference (a dict of key -> second, drained by sorting)
under random adds, moves, removals, drains with time moving by a second, by minutes, hours and
days (cascades, skipped slots), and clock jumps backward; and its cascade boundaries one by one."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from cronwheel.scheduler.wheel import DAY, HOUR, MINUTE, TimingWheel

Entry = tuple[str, int]  # (key, due second)

START = 1_767_225_600 + 23 * HOUR + 58 * MINUTE  # 2026-12-31 23:58 UTC: near a minute, hour, day
KEYS = st.sampled_from([f"job-{index}" for index in range(40)])
# how far from the clock an entry is due: around now, within the rings, past the day
OFFSETS = st.one_of(
    st.integers(-5, 5),
    st.integers(-120, 120),
    st.integers(-HOUR, 2 * HOUR),
    st.integers(-2 * DAY, 3 * DAY),
    st.sampled_from([MINUTE, HOUR, DAY, MINUTE - 1, HOUR - 1, DAY - 1, MINUTE + 1, HOUR + 1, DAY + 1]),
)
STEPS = st.one_of(
    st.integers(0, 3),
    st.integers(1, 130),
    st.sampled_from([MINUTE, HOUR, DAY, HOUR - 1, DAY + 1, 2 * DAY + 37]),
    st.integers(1, 3 * DAY),
)


class WheelMatchesReference(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.wheel: TimingWheel[Entry] = TimingWheel(lambda entry: entry[1])
        self.reference: dict[str, int] = {}
        self.now = START

    @initialize(start=st.integers(-2 * DAY, 2 * DAY))
    def start_at(self, start: int) -> None:
        self.now = START + start

    @rule(key=KEYS, offset=OFFSETS)
    def add(self, key: str, offset: int) -> None:
        self.wheel.add(key, (key, self.now + offset))
        self.reference[key] = self.now + offset

    @rule(key=KEYS, seconds=st.sampled_from([0, 1, 59, 60, 61, 3599, 3600, 86_399, 86_400]))
    def add_on_a_boundary(self, key: str, seconds: int) -> None:
        due = self.now // DAY * DAY + seconds  # slot edges of the clock's day and the next
        self.wheel.add(key, (key, due))
        self.reference[key] = due

    @rule(key=KEYS)
    def remove(self, key: str) -> None:
        removed = self.wheel.remove(key)
        expected = self.reference.pop(key, None)
        assert removed == (None if expected is None else (key, expected))

    @rule(step=STEPS)
    def advance(self, step: int) -> None:
        self.now += step
        self.drain()

    @rule(step=st.one_of(st.integers(1, 90), st.integers(1, 2 * DAY)))
    def jump_back(self, step: int) -> None:
        self.now -= step
        self.drain()

    @precondition(lambda self: self.reference)
    @rule()
    def advance_to_next_due(self) -> None:
        self.now = min(self.reference.values())
        self.drain()

    def drain(self) -> None:
        drained = self.wheel.pop_due(self.now)
        due = sorted((second, key) for key, second in self.reference.items() if second <= self.now)
        assert sorted((second, key) for key, second in drained) == due
        assert [second for _, second in drained] == sorted(second for _, second in drained)
        for _, key in due:
            del self.reference[key]

    @invariant()
    def same_entries(self) -> None:
        assert len(self.wheel) == len(self.reference)
        assert dict(self.wheel.entries) == {key: (key, due) for key, due in self.reference.items()}
        assert set(self.wheel) == set(self.reference)

    @invariant()
    def same_next_due(self) -> None:
        assert self.wheel.next_due() == min(self.reference.values(), default=None)

    @invariant()
    def same_counts(self) -> None:
        for second in {*self.reference.values(), self.now, self.now + 1}:
            expected = sum(1 for due in self.reference.values() if due == second)
            assert self.wheel.count_at(second) == expected
        assert self.wheel.counts(self.now - 2, self.now + 3) == [
            sum(1 for due in self.reference.values() if due == second)
            for second in range(self.now - 2, self.now + 3)
        ]


WheelMatchesReference.TestCase.settings = settings(
    max_examples=300, stateful_step_count=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_the_wheel_matches_a_sorted_reference = WheelMatchesReference.TestCase


# -- cascade boundaries ---------------------------------------------------------------------------


def wheel_at(cursor: int) -> TimingWheel[Entry]:
    wheel: TimingWheel[Entry] = TimingWheel(lambda entry: entry[1])
    assert wheel.pop_due(cursor) == []
    assert wheel.cursor == cursor
    return wheel


def put(wheel: TimingWheel[Entry], key: str, due: int) -> None:
    wheel.add(key, (key, due))


def drained(wheel: TimingWheel[Entry], now: int) -> list[str]:
    return [key for key, _ in wheel.pop_due(now)]


def test_a_minute_slot_cascades_into_seconds_at_the_minute() -> None:
    minute = 1_000_020 * MINUTE
    wheel = wheel_at(minute - 1)
    put(wheel, "at", minute)
    put(wheel, "after", minute + 1)
    put(wheel, "end", minute + 59)
    put(wheel, "next", minute + 60)
    assert wheel.next_due() == minute
    assert drained(wheel, minute) == ["at"]
    assert wheel.next_due() == minute + 1  # now in the seconds ring
    assert wheel.count_at(minute + 59) == 1
    assert drained(wheel, minute + 58) == ["after"]
    assert drained(wheel, minute + 59) == ["end"]
    assert wheel.next_due() == minute + 60
    assert drained(wheel, minute + 60) == ["next"]
    assert len(wheel) == 0
    assert wheel.next_due() is None


def test_an_hour_slot_cascades_into_minutes_and_seconds() -> None:
    hour = 400_000 * HOUR
    wheel = wheel_at(hour - 30)
    for key, due in [("h", hour), ("h+1", hour + 1), ("h+61", hour + 61), ("h+3599", hour + 3599)]:
        put(wheel, key, due)
    assert wheel.next_due() == hour
    assert drained(wheel, hour) == ["h"]
    assert wheel.next_due() == hour + 1
    assert drained(wheel, hour + 60) == ["h+1"]
    assert drained(wheel, hour + 61) == ["h+61"]
    assert wheel.next_due() == hour + 3599
    assert drained(wheel, hour + 3598) == []
    assert drained(wheel, hour + 3599) == ["h+3599"]


def test_the_overflow_cascades_at_midnight() -> None:
    day = 20_000 * DAY
    wheel = wheel_at(day - 1)
    for key, due in [("d", day), ("d+3661", day + 3661), ("tomorrow", day + DAY), ("later", day + 3 * DAY)]:
        put(wheel, key, due)
    wheel.remove("d")
    put(wheel, "d", day + 2)  # moved within the next day, still in the overflow
    assert wheel.next_due() == day + 2
    assert drained(wheel, day) == []
    assert drained(wheel, day + 2) == ["d"]
    assert wheel.next_due() == day + 3661
    assert drained(wheel, day + DAY) == ["d+3661", "tomorrow"]
    assert wheel.next_due() == day + 3 * DAY


def test_a_jump_of_days_drains_every_ring_in_order() -> None:
    start = 19_999 * DAY + 23 * HOUR + 59 * MINUTE + 58
    wheel = wheel_at(start)
    dues = [start + 1, start + 2, start + 62, start + HOUR, start + DAY, start + 2 * DAY, start + 9 * DAY]
    for index, due in enumerate(dues):
        put(wheel, f"k{index}", due)
    assert [due for _, due in wheel.pop_due(start + 2 * DAY)] == dues[:-1]
    assert wheel.next_due() == dues[-1]
    assert wheel.count_at(dues[-1]) == 1


def test_a_backward_jump_keeps_later_entries_and_drains_the_past_ones_it_reaches() -> None:
    wheel = wheel_at(5_000_000)
    put(wheel, "ahead", 5_000_010)
    assert drained(wheel, 4_990_000) == []  # the clock went back: nothing new is due
    assert wheel.cursor == 5_000_000
    put(wheel, "soon", 4_990_005)  # due before the cursor: the past
    put(wheel, "late", 4_999_999)
    assert wheel.next_due() == 4_990_005
    assert drained(wheel, 4_990_004) == []
    assert drained(wheel, 4_990_005) == ["soon"]
    assert wheel.count_at(4_999_999) == 1
    assert drained(wheel, 5_000_010) == ["late", "ahead"]


def test_moving_an_entry_between_rings_leaves_no_trace() -> None:
    wheel = wheel_at(7_000_000 * MINUTE)
    now = 7_000_000 * MINUTE
    for due in [now + 5, now + 500, now + 50_000, now + 5 * DAY, now - 10, now + 20]:
        put(wheel, "a", due)
        assert len(wheel) == 1
        assert wheel.next_due() == due
        assert wheel.count_at(due) == 1
    assert wheel.counts(now + 5, now + 21) == [0] * 15 + [1]
    assert drained(wheel, now + 19) == []
    assert drained(wheel, now + 20) == ["a"]


def test_a_herd_in_one_second_and_counts_ahead() -> None:
    minute = 30_000_000 * MINUTE
    wheel = wheel_at(minute - 90)
    for index in range(5_000):
        put(wheel, f"job-{index}", minute + (index % 3) * MINUTE + (index % 2))
    assert wheel.counts(minute, minute + 2) == [834, 833]
    assert wheel.count_at(minute + 2 * MINUTE + 1) == 833
    assert wheel.next_due() == minute
    assert len(wheel.pop_due(minute + MINUTE)) == 834 + 833 + 833
    assert wheel.next_due() == minute + MINUTE + 1
