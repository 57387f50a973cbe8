"""The suite runs apart from the user's own cronwheel. Set up by tests/conftest.py before any test
module is imported (``pytest_configure``) and undone when the run ends, for this process and every
process a test starts (they inherit the environment and the working directory):

* ``HOME`` and the XDG base directories (``XDG_CONFIG_HOME``, ``XDG_STATE_HOME``, ``XDG_DATA_HOME``,
  ``XDG_CACHE_HOME``) are directories of the run's own, empty at its start: the CLI's config file
  and contexts (``~/.config/cronwheel/config.yaml``) and the pointers a local server leaves
  (``~/.local/state/cronwheel/local``) are not the user's.
* Every ``CRONWHEEL_*`` variable but the suite's own settings (:func:`suite_setting`) is removed:
  the ``CRONWHEEL_URL``, ``CRONWHEEL_TOKEN``, ``CRONWHEEL_DATABASE_URL``... of the user's shell reach
  no test, and no server or CLI that a test starts.
* The working directory is an empty directory of the run's own: the ``cronwheel.db`` and
  ``cronwheel.db.token`` that ``scripts/cronwheel server`` leaves in the clone (the README's first
  command) are not the CLI's ``./cronwheel.db.token``.
* What the run keeps of the user's: a ``~/.pgpass`` (as ``PGPASSFILE``, for the suite's own
  PostgreSQL server) and Hypothesis's example database in ``.hypothesis`` of the directory pytest
  was started in (``HYPOTHESIS_STORAGE_DIRECTORY``), unless either is set already.

The PostgreSQL database and Redis database the suite uses are not the user's either
(``suite_backends``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

# The suite's own settings: every CRONWHEEL_TEST_* variable, and these (scripts/test sets the
# first two; the others tune test modules).
SUITE_PREFIX = "CRONWHEEL_TEST_"
SUITE_SETTINGS = frozenset(
    {
        "CRONWHEEL_CHROMIUM",
        "CRONWHEEL_FAKETIME_LIB",
        "CRONWHEEL_HYPOTHESIS",
        "CRONWHEEL_CHAOS_SEED",
        "CRONWHEEL_FUZZ_EXAMPLES",
    }
)
XDG_DIRECTORIES = {
    "XDG_CONFIG_HOME": ".config",
    "XDG_STATE_HOME": ".local/state",
    "XDG_DATA_HOME": ".local/share",
    "XDG_CACHE_HOME": ".cache",
}


def suite_setting(name: str) -> bool:
    """Whether the environment variable ``name`` is one of the suite's settings (kept)."""
    return name.startswith(SUITE_PREFIX) or name in SUITE_SETTINGS


def isolated_environment(env: Mapping[str, str], home: Path, started_in: Path) -> dict[str, str]:
    """``env`` with ``home`` as ``HOME`` (and the XDG directories in it) and without the user's
    CRONWHEEL_* settings; ``started_in`` is where pytest was started."""
    isolated = {
        name: value
        for name, value in env.items()
        if not (name.startswith("CRONWHEEL_") and not suite_setting(name))
    }
    isolated["HOME"] = str(home)
    for name, below in XDG_DIRECTORIES.items():
        isolated[name] = str(home / below)
    user_home = Path(env.get("HOME") or Path.home())
    if "PGPASSFILE" not in env and (user_home / ".pgpass").is_file():
        isolated["PGPASSFILE"] = str(user_home / ".pgpass")
    isolated.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", str(started_in / ".hypothesis"))
    return isolated


@dataclass(frozen=True)
class Isolation:
    root: Path  # everything of the run's own: home/ and cwd/
    environment: dict[str, str]  # the user's, restored at the end
    directory: Path  # the user's working directory, restored at the end

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def cwd(self) -> Path:
        return self.root / "cwd"


ISOLATION = pytest.StashKey[Isolation]()


def begin(started_in: Path) -> Isolation:
    """Isolate this process (and so what it starts from now on); ``started_in`` is where pytest
    was started."""
    isolation = Isolation(Path(tempfile.mkdtemp(prefix="cronwheel-tests-")), dict(os.environ), Path.cwd())
    environment = isolated_environment(isolation.environment, isolation.home, started_in)
    for name in XDG_DIRECTORIES:
        Path(environment[name]).mkdir(mode=0o700, parents=True)
    isolation.cwd.mkdir()
    os.environ.clear()
    os.environ.update(environment)
    os.chdir(isolation.cwd)
    return isolation


def end(isolation: Isolation) -> None:
    """Give back the user's environment and working directory; remove the run's own."""
    os.chdir(isolation.directory)
    os.environ.clear()
    os.environ.update(isolation.environment)
    shutil.rmtree(isolation.root, ignore_errors=True)
