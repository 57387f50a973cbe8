"""The operator's limits record (cronwheel.limits.Limits): settings that cannot work are refused
at start, naming the option."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cronwheel.errors import PermanentError
from cronwheel.limits import Limits, TooFrequentError
from cronwheel.node.server import ServerSettings
from cronwheel.schedule import parse_schedule


@pytest.mark.parametrize(
    ("changes", "option"),
    [
        ({"max_body_bytes": 100}, "--max-body-bytes"),
        ({"max_header_count": 0}, "--max-header-count"),
        ({"max_header_bytes": 10}, "--max-header-bytes"),
        ({"rate_per_s": -1.0}, "--rate-limit"),
        ({"rate_per_s": 5.0, "rate_burst": 0}, "--rate-limit"),
        ({"max_jobs_per_team": -1}, "--max-jobs-per-team"),
        ({"min_interval_s": 8 * 86_400}, "--min-interval"),
    ],
)
def test_settings_that_cannot_work_stop_the_server_naming_the_option(
    changes: dict[str, float], option: str
) -> None:
    settings = ServerSettings(limits=Limits(**changes))  # type: ignore[arg-type]
    with pytest.raises(PermanentError, match=option):
        settings.check()


def test_zero_turns_the_rate_quota_and_interval_off() -> None:
    limits = Limits(rate_per_s=0, max_jobs_per_team=0, min_interval_s=0)
    limits.check()
    assert limits.team_quota is None
    limits.check_interval(parse_schedule("* * * * * *", "UTC"), datetime(2026, 1, 1, tzinfo=UTC))


def test_the_interval_is_said_in_the_unit_that_reads_best() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(TooFrequentError, match=r"fires 30 min apart .* at least 1 h between fires"):
        Limits(min_interval_s=3600).check_interval(parse_schedule("*/30 * * * *", "UTC"), now)
    with pytest.raises(TooFrequentError, match=r"fires 30 s apart .* at least 90 s between fires"):
        Limits(min_interval_s=90).check_interval(parse_schedule("0,30 * * * * *", "UTC"), now)
