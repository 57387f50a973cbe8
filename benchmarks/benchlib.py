"""What the benchmark scripts share: the local services they use, private storage on them, and
the figures every report carries (process CPU, peak memory, the machine).

Each ``bench_*.py`` is run as a script (``python benchmarks/bench_fire.py``), so this directory
is on ``sys.path`` and they import this module as ``benchlib``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import platform
import resource
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg
import redis.asyncio as aioredis

POSTGRES_ADMIN = os.environ.get("CRONWHEEL_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
REDIS_URL = os.environ.get("CRONWHEEL_BENCH_REDIS", "redis://127.0.0.1:6379/0")
DB_PREFIX = os.environ.get("CRONWHEEL_BENCH_DB_PREFIX", "cronwheel")  # of the databases created


TAG = "@bench "  # protocol lines between a benchmark and its children (py-spy may print too)


def tell(word: str, data: Any = None) -> None:
    """Say ``word`` (with ``data`` as JSON) to the parent process, on one tagged line of stdout."""
    print(f"{TAG}{word} {json.dumps(data)}", flush=True)


def peer_python(name: str) -> Path:
    """The interpreter of a peer that cannot share ``.venv`` (its pins clash with the tests'):
    ``.venv-peer-<name>``, created on first use from the hash-checked
    ``requirements/peer-<name>.lock``, and reinstalled when the lock changes."""
    root = Path(__file__).resolve().parent.parent
    lock = root / "requirements" / f"peer-{name}.lock"
    venv = root / f".venv-peer-{name}"
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    want = hashlib.sha256(lock.read_bytes()).hexdigest()
    if python.exists() and stamp.exists() and stamp.read_text() == want:
        return python
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    install = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*install, "--require-hashes", "-r", str(lock)], check=True)
    stamp.write_text(want)
    return python


def database_url(name: str) -> str:
    """The URL of database ``name`` on the benchmark's PostgreSQL server."""
    return POSTGRES_ADMIN.rsplit("/", 1)[0] + f"/{name}"


async def admin(sql: str) -> None:
    """Run one statement on the PostgreSQL server's admin database (CREATE/DROP DATABASE)."""
    connection = await asyncpg.connect(POSTGRES_ADMIN)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


async def drop_keys(prefix: str) -> None:
    """Delete every Redis key under ``prefix:``."""
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        keys = [key async for key in client.scan_iter(f"{prefix}:*")]
        if keys:
            await client.delete(*keys)
    finally:
        await client.aclose()


def cpu_now() -> float:
    """CPU seconds (user + system) this process has used so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def database_cpu_s(database: str) -> dict[int, float]:
    """CPU seconds (user + system) each PostgreSQL backend connected to ``database`` has used so
    far, by pid (the server runs on this machine; its shared processes, the WAL writer and the
    checkpointer, are not counted)."""
    connection = await asyncpg.connect(POSTGRES_ADMIN)
    try:
        pids = [
            row[0]
            for row in await connection.fetch("SELECT pid FROM pg_stat_activity WHERE datname = $1", database)
        ]
    finally:
        await connection.close()
    ticks = os.sysconf("SC_CLK_TCK")
    used: dict[int, float] = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            used[pid] = (int(fields[11]) + int(fields[12])) / ticks
    return used


async def redis_cpu_s() -> float:
    """CPU seconds the whole Redis server has used so far (``INFO cpu``: every client's share)."""
    client = aioredis.Redis.from_url(REDIS_URL)
    try:
        info = await client.info("cpu")
    finally:
        await client.aclose()
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def reset_peak_rss() -> None:
    """Linux: restart the peak-memory count (VmHWM) from the current size."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def peak_rss_mb() -> float:
    """This process's peak resident memory, in MB (VmHWM, else ru_maxrss)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def save_results(path: Path | None, results: Sequence[Any], machine_facts: dict[str, Any]) -> None:
    """Write ``results`` (dataclass records) to ``path`` as JSON, with the machine they ran on."""
    if path is not None:
        figures = [dataclasses.asdict(result) for result in results]
        path.write_text(json.dumps({"machine": machine_facts, "results": figures}, indent=1))


def machine(**extra: Any) -> dict[str, Any]:
    """The machine a run is on, and how busy it was (the 1, 5 and 15 minute load averages)."""
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "loadavg": [round(load, 2) for load in os.getloadavg()],
        **extra,
    }
