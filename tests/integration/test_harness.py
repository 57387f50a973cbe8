"""The harness's server process: one whose start times out is still stopped, and stopping one
never started is safe (the ``server_factory`` fixture stops every server it made)."""

from __future__ import annotations

from pathlib import Path

import pytest
from server_harness import ServerProcess

pytestmark = pytest.mark.integration


def test_a_server_whose_start_timed_out_is_stopped(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "cronwheel.db", (), tmp_path / "server.log")
    with pytest.raises(AssertionError, match="server did not start"):
        server.start(timeout=0.0)
    assert server.process is not None
    assert server.process.poll() is None  # still running: only stop() ends it
    server.stop()
    assert server.process.poll() is not None
    assert server.stop() == server.process.returncode  # again: no error


def test_stopping_a_server_never_started_is_safe(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "cronwheel.db", (), tmp_path / "server.log")
    assert server.stop() == 0
    assert server.stop() == 0
    assert server.process is None
