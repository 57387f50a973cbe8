"""What keeps the suite's pytest-xdist workers apart (``scripts/test`` runs it with ``-n``).

Each worker is a process of its own (``PYTEST_XDIST_WORKER``: ``gw0``, ``gw1``...; unset without
xdist, which counts as worker 0). What one test starts must never meet another worker's:

* temporary files and directories: pytest's ``tmp_path`` is per worker already (``popen-gwN``);
  the run's home and working directory too (``suite_isolation``, begun in each worker);
* PostgreSQL databases and Redis key prefixes: named with :data:`WORKER` and a random part
  (:func:`unique_name`), so a leftover says which worker made it;
* TCP ports a test picks before a server binds them (:func:`free_port`): from a block of ports
  of the worker's own, below the kernel's ephemeral range. A port the kernel hands out for
  ``bind(("127.0.0.1", 0))`` is free only until the probe closes it: another worker, or any
  outgoing connection, may take it before the server starts. Ports of a worker's block are
  handed out by no one else.
"""

from __future__ import annotations

import itertools
import os
import random
import socket
import threading
import uuid

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
WORKER_INDEX = int(WORKER.removeprefix("gw")) if WORKER.removeprefix("gw").isdigit() else 0

# Linux hands out ephemeral ports from 32768 (net.ipv4.ip_local_port_range); the blocks lie below.
# Each worker owns PORTS_PER_WORKER ports from PORT_BASE up; 16 workers fit under 32768.
PORT_BASE = 16384
PORTS_PER_WORKER = 1024
_block = range(PORT_BASE + WORKER_INDEX * PORTS_PER_WORKER, PORT_BASE + (WORKER_INDEX + 1) * PORTS_PER_WORKER)
# From a random place in the block: a process a test starts (a chaos node) has a turn of its own.
_start = random.randrange(PORTS_PER_WORKER)
_next_port = itertools.cycle([*_block[_start:], *_block[:_start]])
_lock = threading.Lock()


def unique_name(stem: str) -> str:
    """``stem`` with this worker's id and a random part: a PostgreSQL database, a key prefix."""
    return f"{stem}_{WORKER}_{uuid.uuid4().hex[:12]}"


def free_port() -> int:
    """A loopback TCP port of this worker's block that nothing listens on (nor holds in TIME_WAIT):
    the next one of the block in turn, so a port a test just gave up is not handed out again soon."""
    with _lock:
        for _ in range(PORTS_PER_WORKER):
            port: int = next(_next_port)
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
    raise OSError(f"no free port in worker {WORKER}'s block")
