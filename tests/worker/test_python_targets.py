"""Which Python functions a job may call (``cronwheel.targets.python``), proven on a module
written for each test: before, ``mod:rmtree`` (imported there from ``shutil``) ran and deleted a
directory, and with the pattern ``*`` a job could call ``pty:spawn``."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cronwheel.errors import InvalidInputError
from cronwheel.jobs.service import TargetPolicy
from cronwheel.model import Outcome, PythonTarget
from cronwheel.node.server import ServerSettings
from cronwheel.targets.python import check_patterns, pattern_problem, refusal
from cronwheel.worker.executors import AttemptContext, WorkerSettings
from cronwheel.worker.executors.python import PythonExecutor
from cronwheel.worker.refusals import refusal as worker_option

MODULE = """
import functools
import os
from shutil import rmtree
from time import sleep


def defined(payload, ctx):
    return "ran " + repr(payload)


async def defined_async(payload, ctx):
    return "ran async"


def _factory():
    def inner(payload, ctx):
        return "inner"
    return inner


made_here = _factory()
partial = functools.partial(rmtree)
alias = rmtree


class Callable:
    def __call__(self, payload, ctx):
        return os.getcwd()


instance = Callable()


def __getattr__(name):
    return os.system
"""


@pytest.fixture
def jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"cwjobs_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def ctx(payload: object) -> AttemptContext:
    now = datetime(2026, 3, 2, tzinfo=UTC)
    return AttemptContext("run-1", "job-1", "n", "data", now, 1, 5.0, payload=payload)


async def test_only_functions_defined_in_the_module_run(jobs: str, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    executor = PythonExecutor(WorkerSettings(python_allow=(f"{jobs}:*",)))
    try:
        ran = await executor.execute(PythonTarget(f"{jobs}:defined"), ctx(1))
        ran_async = await executor.execute(PythonTarget(f"{jobs}:defined_async"), ctx(1))
        made_here = await executor.execute(PythonTarget(f"{jobs}:made_here"), ctx(1))
        refused = {
            name: await executor.execute(PythonTarget(f"{jobs}:{name}"), ctx(str(victim)))
            for name in ("rmtree", "alias", "partial", "sleep", "instance", "Callable", "system", "os")
        }
    finally:
        await executor.close()
    assert (ran.outcome, ran.output) == (Outcome.SUCCESS, "ran 1")
    assert (ran_async.outcome, ran_async.output) == (Outcome.SUCCESS, "ran async")
    assert (made_here.outcome, made_here.output) == (Outcome.SUCCESS, "inner")
    assert victim.is_dir()  # rmtree never ran
    for name, result in refused.items():
        assert result.outcome is Outcome.ERROR, name
    assert refused["rmtree"].error == (
        f"{jobs}:rmtree is shutil.rmtree, imported there: only functions defined in {jobs} may run"
    )
    assert "is shutil.rmtree, imported there" in str(refused["alias"].error)
    assert refused["partial"].error == f"{jobs}:partial is not a function defined there (its type is partial)"
    assert "(its type is builtin_function_or_method)" in str(refused["sleep"].error)
    assert refused["system"].error == f"{jobs}:system: {jobs} has no function system"  # not __getattr__'s
    assert refused["os"].error == f"{jobs}:os is not a function defined there (its type is module)"


@pytest.mark.parametrize(
    ("function", "message"),
    [
        (
            "pty:spawn",
            "python target 'pty:spawn' is not allowed: pty is in the standard library, never a target",
        ),
        (
            "subprocess:run",
            "python target 'subprocess:run' is not allowed: subprocess is in the standard library",
        ),
        (
            "os.path:join",
            "python target 'os.path:join' is not allowed: os is in the standard library, never a target",
        ),
        (
            "cronwheel.cli:main",
            "python target 'cronwheel.cli:main' is not allowed: cronwheel is the scheduler's own package",
        ),
        ("mypkg.jobs:os.system", "target.function must be 'package.module:function'"),
        ("mypkg.jobs:__class__", "target.function must be 'package.module:function'"),
        ("mypkg.other:run", "python target 'mypkg.other:run' is not allowed by this server's --allow-python"),
    ],
)
def test_one_refusal_for_api_and_worker(function: str, message: str) -> None:
    patterns = ("mypkg.jobs:*", "mypkg.j*:run")
    found = refusal(function, patterns)
    assert found is not None
    assert found.startswith(message)
    with pytest.raises(InvalidInputError) as api:
        TargetPolicy(python_allow=patterns).check(PythonTarget(function))
    assert str(api.value) == found


@pytest.mark.parametrize(
    "pattern",
    ["*", "*:*", "*:spawn", "my*:run", "?ypkg:run", "[m]ypkg:run", "pty:*", "os.*", "cronwheel.*:*", ":run"],
)
def test_patterns_must_name_their_top_level_package(pattern: str) -> None:
    assert pattern_problem(pattern) is not None
    with pytest.raises(InvalidInputError, match=r"--allow-python .* is refused"):
        check_patterns([pattern])
    with pytest.raises(InvalidInputError):
        WorkerSettings(python_allow=(pattern,))
    with pytest.raises(InvalidInputError):
        TargetPolicy(python_allow=(pattern,))
    with pytest.raises(InvalidInputError):
        ServerSettings(python_allow=(pattern,)).check()  # `cronwheel server` stops, exit 2


@pytest.mark.parametrize("pattern", ["mypkg.jobs:*", "mypkg.*:run", "mypkg", "nightly:*", "jobs.*"])
def test_patterns_that_name_a_package_are_fine(pattern: str) -> None:
    assert pattern_problem(pattern) is None


def test_the_worker_says_when_no_option_helps() -> None:
    settings = WorkerSettings(python_allow=("mypkg.*",))
    assert worker_option(PythonTarget("other:run"), settings) == "--allow-python 'other:run'"
    assert worker_option(PythonTarget("pty:spawn"), settings) == (
        "no option: python target 'pty:spawn' is not allowed: pty is in the standard library, never a target"
    )
    assert worker_option(PythonTarget("mypkg.jobs:run"), settings) is None
