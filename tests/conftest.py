"""The whole run is isolated from the user's own cronwheel: home, working directory and CRONWHEEL_*
settings of its own (``suite_isolation``); PostgreSQL and Redis databases of its own
(``suite_backends``)."""

from __future__ import annotations

import pytest

from suite_isolation import ISOLATION, Isolation, begin, end


def pytest_configure(config: pytest.Config) -> None:
    config.stash[ISOLATION] = begin(config.invocation_params.dir)


def pytest_unconfigure(config: pytest.Config) -> None:
    isolation = config.stash.get(ISOLATION, None)
    if isolation is not None:
        end(isolation)
        del config.stash[ISOLATION]


@pytest.fixture(scope="session")
def isolation(pytestconfig: pytest.Config) -> Isolation:
    """The run's own home and working directory, and what they replaced."""
    return pytestconfig.stash[ISOLATION]
