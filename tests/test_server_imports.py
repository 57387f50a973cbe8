"""A server starts without the client libraries of targets it has not run: ``cronwheel server``
(every role, embedded) answers /healthz having imported no broker client (nats, aiokafka,
aiomqtt, aiormq) and, serving no gRPC API, no grpc; each is loaded by the first attempt of its
kind (:data:`cronwheel.worker.executors.EXECUTORS`). Every process the server starts would
otherwise pay for them (about a second of CPU)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CLIENTS = ("nats", "aiokafka", "aiomqtt", "paho", "aiormq", "aio_pika", "pamqp", "grpc")
"""The client libraries a server loads only for a target (or the gRPC API) that needs one."""

URL_LINE = re.compile(r"cronwheel serving on (http://\S+)")
IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)$", re.MULTILINE)


def loaded(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return [each for each in packages if any(m == each or m.startswith(f"{each}.") for m in modules)]


def served_modules(tmp_path: Path) -> set[str]:
    """The modules ``cronwheel server`` imported by the time it answered /healthz (and until it
    stopped), from ``python -X importtime``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CRONWHEEL_") or k == "CRONWHEEL_TEST_RUN"}
    output = tmp_path / "server.log"
    command = [sys.executable, "-X", "importtime", "-m", "cronwheel", "server", "--port", "0"]
    command += ["--database-url", f"sqlite:///{tmp_path / 'cronwheel.db'}"]
    with (
        output.open("w") as log,
        subprocess.Popen(command, stdout=log, stderr=log, env=env, cwd=tmp_path) as server,
    ):
        try:
            deadline = time.monotonic() + 60
            while (found := URL_LINE.search(output.read_text())) is None:
                assert server.poll() is None, output.read_text()[-4000:]
                assert time.monotonic() < deadline, output.read_text()[-4000:]
                time.sleep(0.05)
            with urllib.request.urlopen(f"{found.group(1)}/healthz", timeout=30) as answer:
                assert answer.status == 200
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
    return set(IMPORT_LINE.findall(output.read_text()))


def test_a_started_server_loads_no_client_of_a_target_it_has_not_run(tmp_path: Path) -> None:
    modules = served_modules(tmp_path)
    assert "cronwheel.worker.executors.http" in modules  # the worker role did start
    assert loaded(modules, CLIENTS) == []


@pytest.mark.parametrize(
    ("kind", "client"),
    [("grpc", "grpc"), ("nats", "nats"), ("mqtt", "aiomqtt"), ("rabbitmq", "aiormq"), ("kafka", "aiokafka")],
)
def test_the_first_executor_of_a_kind_loads_its_client(kind: str, client: str) -> None:
    code = (
        "import sys\nfrom cronwheel.worker.executors import Executors\n"
        f"executors = Executors()\nbefore = {client!r} in sys.modules\nexecutors[{kind!r}]\n"
        f"print(before, {client!r} in sys.modules)"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert shown.stdout.split() == ["False", "True"]
