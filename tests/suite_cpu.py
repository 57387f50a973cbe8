"""CPU seconds per test, for finding what makes the suite slow (docs/testing.md, "Where the time
goes"): ``scripts/test -p suite_cpu`` with ``CRONWHEEL_TEST_CPU_REPORT=DIR`` writes one line per
test to ``DIR/<worker>.tsv``: the CPU of the test process and of the children it waited for (servers
and benchmark processes it started), and the wall time, all in seconds. CPU, unlike wall time,
hardly depends on what else the machine is doing, so a run beside other work still ranks the tests.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Generator
from pathlib import Path

import pytest


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None]:
    folder = os.environ.get("CRONWHEEL_TEST_CPU_REPORT")
    if not folder:
        yield
        return
    own, children, wall = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN), time.monotonic()
    yield
    own = _cpu(resource.RUSAGE_SELF) - own
    children = _cpu(resource.RUSAGE_CHILDREN) - children
    wall = time.monotonic() - wall
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with (Path(folder) / f"{worker}.tsv").open("a") as report:
        report.write(f"{own + children:.2f}\t{own:.2f}\t{children:.2f}\t{wall:.2f}\t{item.nodeid}\n")
