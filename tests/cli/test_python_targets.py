"""Where the server finds a python target's module, as docs/service.md says: on the worker's
``sys.path``, which ``PYTHONPATH`` extends; the working directory of a server started with the
``cronwheel`` command is not on it.

The server runs as a user starts it, the ``cronwheel`` console script in a subprocess, in a
working directory that holds one module, with ``PYTHONPATH`` naming a directory that holds
another.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cronwheel.client import Client

MODULE = 'def hello(payload, ctx):\n    return f"hello {payload} from {__name__}"\n'
URL_LINE = re.compile(r"cronwheel serving on (http://\S+)")

pytestmark = pytest.mark.integration


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Client]:
    workdir, code = tmp_path / "workdir", tmp_path / "code"
    workdir.mkdir()
    code.mkdir()
    (workdir / "in_workdir.py").write_text(MODULE)
    (code / "on_pythonpath.py").write_text(MODULE)
    log = tmp_path / "server.log"
    command = [
        str(Path(sys.executable).with_name("cronwheel")), "server", "--port", "0",
        "--database-url", f"sqlite:///{tmp_path / 'cronwheel.db'}",
        "--allow-python", "in_workdir:*", "--allow-python", "on_pythonpath:*",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(code)}
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=workdir, env=env, stdout=out, stderr=out)
    try:
        url = _served_url(process, log)
        with Client(url, token=(tmp_path / "cronwheel.db.token").read_text().strip()) as client:
            yield client
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def _served_url(process: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        match = URL_LINE.search(log.read_text(errors="replace"))
        if match:
            return match.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"the server did not start:\n{log.read_text(errors='replace')}")


def _run_to_end(client: Client, module: str) -> dict[str, Any]:
    job = {
        "team": "me", "name": module, "schedule": "@yearly", "payload": "you",
        "target": {"type": "python", "function": f"{module}:hello"},
    }  # fmt: skip
    job_id = client.create_job(job)["id"]
    run_id = client.trigger_job(job_id).run["id"]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        run: dict[str, Any] = dict(client.get_run(run_id))
        if run["state"] in ("SUCCESS", "FAILED"):
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not end: {run['state']}")


def test_module_on_pythonpath_runs_and_working_directory_is_not_searched(server: Client) -> None:
    found = _run_to_end(server, "on_pythonpath")
    assert found["state"] == "SUCCESS"
    assert found["attempt_details"][0]["output"] == "hello you from on_pythonpath"
    missing = _run_to_end(server, "in_workdir")
    assert missing["state"] == "FAILED"
    (attempt,) = missing["attempt_details"]
    assert attempt["outcome"] == "error"
    assert attempt["error"] == "cannot import in_workdir: ModuleNotFoundError: No module named 'in_workdir'"
