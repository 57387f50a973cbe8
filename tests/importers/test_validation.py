"""Every job of every fixture passes the API's own job schema, as `cronwheel apply -f` checks it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from cronwheel.cli.apply import job_problems
from cronwheel.importers import apscheduler, celery, crontab, dkron, kubernetes
from cronwheel.importers.report import ImportResult

from .support import OPTIONS, fixture

IMPORTS: dict[str, Callable[[], ImportResult]] = {
    "user.crontab": lambda: crontab.convert(fixture("user.crontab"), OPTIONS),
    "system.crontab": lambda: crontab.convert(fixture("system.crontab"), OPTIONS, system=True),
    "cronjobs.yaml": lambda: kubernetes.convert(fixture("cronjobs.yaml"), OPTIONS),
    "dkron_jobs.json": lambda: dkron.convert(fixture("dkron_jobs.json"), OPTIONS),
    "celeryconfig.py": lambda: celery.convert(fixture("celeryconfig.py"), OPTIONS),
    "celery_beat.yaml": lambda: celery.convert(fixture("celery_beat.yaml"), OPTIONS, python=False),
    "aps_jobs.py": lambda: apscheduler.convert(fixture("aps_jobs.py"), OPTIONS, module="shop.schedule"),
}


def refused(jobs: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The jobs the API's schema refuses, with its reasons."""
    found = {job["name"]: job_problems({"team": OPTIONS.team, **job}) for job in jobs}
    return {name: problems for name, problems in found.items() if problems}


def interval_or_one_off(job: dict[str, Any]) -> bool:
    return str(job["schedule"]).startswith(("@every ", "@at "))


@pytest.mark.parametrize("name", sorted(IMPORTS))
def test_cron_mapped_jobs_are_valid(name: str) -> None:
    jobs = [job for job in IMPORTS[name]().jobs if not interval_or_one_off(job)]
    assert jobs
    assert refused(jobs) == {}


@pytest.mark.parametrize("name", sorted(IMPORTS))
def test_interval_and_one_off_jobs_are_valid(name: str) -> None:
    jobs = [job for job in IMPORTS[name]().jobs if interval_or_one_off(job)]
    assert refused(jobs) == {}


def test_every_format_has_intervals_or_one_off_runs_to_check() -> None:
    found = {name for name, convert in IMPORTS.items() if any(map(interval_or_one_off, convert().jobs))}
    assert found == {"dkron_jobs.json", "celeryconfig.py", "celery_beat.yaml", "aps_jobs.py"}


def test_the_check_refuses_what_the_api_refuses() -> None:
    bad = {
        "team": "ops",
        "name": "x",
        "schedule": "61 * * * *",
        "target": {"type": "python", "function": "a"},
    }
    assert len(job_problems(bad)) == 2
