"""The test tooling cleans up after itself: ``scripts/etcd install`` starts nothing, and
``scripts/leftovers`` (run by ``scripts/test`` at exit) finds and stops what a run left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def _etcd_processes(mark: str) -> set[int]:
    """etcd processes carrying ``mark`` in their environment (those started from this test, not
    any other etcd the machine runs meanwhile)."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            etcd = entry.name.isdigit() and (entry / "comm").read_text().strip() == "etcd"
            if etcd and f"CRONWHEEL_TEST_RUN={mark}".encode() in _environ(entry):
                found.add(int(entry.name))
        except OSError:
            continue
    return found


def _environ(process: Path) -> list[bytes]:
    return (process / "environ").read_bytes().split(b"\0")


def test_etcd_install_only_makes_sure_of_the_binary() -> None:
    mark = f"test-{uuid.uuid4().hex}"
    env = {**os.environ, "CRONWHEEL_TEST_RUN": mark}
    done = subprocess.run(
        [SCRIPTS / "etcd", "install"], capture_output=True, text=True, check=False, timeout=600, env=env
    )
    assert done.returncode == 0, done.stderr
    binary = Path(done.stdout.strip())
    assert binary.name == "etcd"
    assert os.access(binary, os.X_OK)
    time.sleep(0.5)
    assert _etcd_processes(mark) == set()  # no server started


def test_leftovers_finds_a_detached_process_and_stops_it() -> None:
    mark = f"test-{uuid.uuid4().hex}"
    env = {**os.environ, "CRONWHEEL_TEST_RUN": mark}
    # detached from this process (its own session), as a script may start a daemon
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"], env=env, start_new_session=True
    )
    clean = {key: value for key, value in os.environ.items() if key != "CRONWHEEL_TEST_RUN"}
    try:
        leftovers = [str(SCRIPTS / "leftovers"), mark]
        found = subprocess.run(
            [*leftovers, "--stop"], capture_output=True, text=True, env=clean, timeout=30, check=False
        )
        assert found.returncode == 1
        assert f"pid {child.pid}" in found.stderr
        assert child.wait(5) is not None  # stopped
        again = subprocess.run(leftovers, capture_output=True, text=True, env=clean, timeout=30, check=False)
        assert again.returncode == 0, again.stderr
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_scripts_promtool_prints_promtool_and_leaves_no_prometheus_running() -> None:
    """``scripts/promtool`` (run by ``scripts/test``) finds promtool, installing Debian's prometheus
    package if need be, and no Prometheus server is left running by the package."""
    found = subprocess.run([SCRIPTS / "promtool"], capture_output=True, text=True, timeout=900, check=False)
    assert found.returncode == 0, found.stderr
    promtool = Path(found.stdout.strip())
    assert os.access(promtool, os.X_OK)
    version = subprocess.run([promtool, "--version"], capture_output=True, text=True, timeout=30, check=False)
    assert "promtool" in version.stdout + version.stderr
    servers = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "comm").read_text().strip() == "prometheus":
                servers.append(entry.name)
        except OSError:
            continue
    assert servers == []
