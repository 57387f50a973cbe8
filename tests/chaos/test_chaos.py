"""The short chaos profiles, run by CI on every change, one per cluster mode: a real cluster on
loopback (two api nodes, three schedulers behind their own proxies, one of them under libfaketime,
two workers, a private PostgreSQL and, in the etcd+Redis mode, a private Redis and three etcd
members), every fault of the profile injected once by a seeded nemesis while the API is used, a
small herd due beside each, then the whole history judged by the independent checker.

Replay a failure with the seed it printed: ``CRONWHEEL_CHAOS_SEED=<seed> scripts/test tests/chaos``.
The long profile and its report: ``scripts/chaos`` (docs/reliability.md).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from chaos_scenario import SHORT, SHORT_POSTGRESQL, Profile, run, write_report

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

SEED = int(os.environ.get("CRONWHEEL_CHAOS_SEED", "20261129"))


@contextlib.contextmanager
def one_cluster_at_a_time(shared: Path) -> Iterator[None]:
    """Held while a cluster runs: a cluster keeps about a core busy, and its lateness bounds are
    the product's, not those of two clusters beside the rest of the suite on two cores. ``shared``
    is the run's temporary folder, the same for every xdist worker."""
    with (shared / "chaos-cluster.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.mark.parametrize("profile", [SHORT, SHORT_POSTGRESQL], ids=lambda profile: profile.mode)
def test_short_profile_loses_nothing_doubles_nothing_and_stays_on_time(
    tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, profile: Profile
) -> None:
    with one_cluster_at_a_time(tmp_path_factory.getbasetemp().parent):
        outcome = run(profile, SEED, tmp_path)
    report_path = tmp_path / "chaos-report.json"
    write_report(outcome, report_path)
    print(json.dumps(outcome.figures, indent=1))
    context = f"seed {SEED}; report {report_path}\n{outcome.report.summary()}\nfindings: {outcome.findings}"
    steps = [fault for fault in outcome.faults if fault.kind != "round herd"]
    assert len(steps) == len(profile.faults), context
    herds = len(outcome.faults) - len(steps)
    assert herds == len(profile.faults) - 1, context  # beside every fault but the big herd
    assert outcome.report.ok, context
    assert outcome.findings == [], context
    counts = outcome.report.to_dict()["counts"]
    assert counts["expected_slots"] > 5_000, counts  # the history is big enough to mean something
    assert counts["calendar_skipped"] > 50, counts  # the closed days' slots were recorded ...
    assert counts["jittered_slots"] > 100, counts  # ... and the jittered slots judged
    assert outcome.report.lateness_calm.count > 300, context  # the calm phase was judged too
    logs = outcome.figures["scheduler_logs"]
    if profile.mode == "postgresql":  # the black hole cut the scheduler off its coordinator too
        assert logs["leases_lost"] > 0, logs
    else:  # etcd still answered: the store's silence made the scheduler step down
        assert logs["step_downs"] > 0, logs
    if "clock_jump" in profile.faults:
        assert logs["clock_reports"] > 0, logs  # the clock jump reached the scheduler
