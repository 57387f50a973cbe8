"""Preview warnings: each fires for its surprise and stays quiet otherwise."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cronwheel.schedule import parse_schedule
from cronwheel.schedule.lint import schedule_warnings

JAN = datetime(2026, 1, 1, tzinfo=UTC)


def warnings(expression: str, zone: str = "UTC", **options: str) -> list[str]:
    return schedule_warnings(parse_schedule(expression, zone, **options), JAN)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "expression", ["0 0 * * *", "*/15 * * * *", "0 9 * * MON-FRI", "@hourly", "0 0 L * *"]
)
def test_plain_schedules_are_quiet(expression: str) -> None:
    assert warnings(expression) == []


def test_day_of_month_or_day_of_week() -> None:
    (found,) = warnings("0 0 1 * MON")
    assert "EITHER" in found
    assert warnings("0 0 */2 * MON") == []  # '*' prefix: both must match, as intended


def test_uneven_step() -> None:
    (found,) = warnings("*/7 * * * *")
    assert found == "minute field: every 7 does not divide 60: after 56 the next is 0, 4 later, not 7"
    (found,) = warnings("0 */5 * * *")
    assert found.startswith("hour field: every 5 does not divide 24")


def test_days_missing_from_some_months() -> None:
    (found,) = warnings("0 0 31 * *")
    assert "day 31 does not exist in every month" in found


def test_hash_without_seed() -> None:
    assert any("empty seed" in w for w in warnings("H * * * *"))
    assert not any("empty seed" in w for w in schedule_warnings(parse_schedule("H * * * *", seed="job"), JAN))


def test_dst_gap_and_fold_for_fixed_time() -> None:
    gap = warnings("30 2 * * *", "America/New_York")
    assert gap == [
        "DST: 02:00-03:00 on 2026-03-08 does not exist in America/New_York; "
        "matching times fire once when the gap ends"
    ]
    fold = warnings("30 1 * * *", "America/New_York")
    assert fold == [
        "DST: 01:00-02:00 on 2026-11-01 happens twice in America/New_York; "
        "matching times fire on the first pass only"
    ]
    skipped = warnings("30 2 * * *", "America/New_York", dst_gap="skip")
    assert skipped[0].endswith("matching times do not fire")


def test_dst_quiet_when_unaffected_or_wildcard() -> None:
    assert warnings("0 12 * * *", "America/New_York") == []
    assert warnings("*/10 * * * *", "America/New_York") == []  # elapsed time: nothing surprising
    assert warnings("30 2 * * *", "Asia/Kolkata") == []
    # but a wildcard schedule with an explicit policy is told where it applies
    assert len(warnings("*/10 * * * *", "America/New_York", dst_fold="first")) == 2
