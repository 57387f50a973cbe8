"""``cronwheel runs logs RUN``: what each attempt of a run wrote, as kept."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from cronwheel.model import AttemptResult, Outcome
from cronwheel.store.sql import open_store

from .conftest import START, Server

LONG = "".join(f"line {i}\n" for i in range(500))


async def _attempts(server: Server, run_id: str) -> None:
    """Two attempts, a failure with a long output then a success (through a store of this test's
    own: the server's belongs to its thread's event loop)."""
    store = await open_store(server.store.engine.url.render_as_string(hide_password=False))
    try:
        for number, result, retry in [
            (1, AttemptResult(Outcome.FAILURE, exit_code=1, output=LONG[-1024:], output_tail=LONG), True),
            (2, AttemptResult(Outcome.SUCCESS, exit_code=0, output="done\n"), False),
        ]:
            assert await store.claim_run(run_id, "w1", START, START + timedelta(seconds=30)) is not None
            await store.finish_attempt(run_id, number, "w1", result, START, START if retry else None)
    finally:
        await store.close()


async def test_logs_prints_each_attempts_kept_output(server: Server) -> None:
    created = server.run("jobs", "create", "--team", "data", "--name", "logs", "--schedule", "0 3 * * *",
                         "--http", "https://hooks.example.com/x")  # fmt: skip
    assert created.exit_code == 0, created.stderr
    run_id = server.run("jobs", "trigger", "data/logs").stdout.split()[2]
    await _attempts(server, run_id)

    printed = server.run("runs", "logs", run_id)

    assert printed.exit_code == 0, printed.stderr
    assert printed.stdout == f"== attempt 1 (failure)\n{LONG}== attempt 2 (success)\ndone\n"
    assert server.json("runs", "logs", run_id)["attempts"][0]["kept"] == "longer"
    missing = server.run("runs", "logs", "nope")
    assert missing.exit_code == 2
    assert "not found" in missing.stderr


def test_a_jobs_retention_from_a_file_is_shown(server: Server, tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "team: data\nname: kept\nschedule: '0 3 * * *'\n"
        "target: {type: http, url: 'https://hooks.example.com/x'}\n"
        "retention: {keep_days: 7, keep_runs: 100}\n"
    )
    assert server.run("jobs", "create", "-f", str(spec)).exit_code == 0
    shown = server.run("jobs", "get", "data/kept").stdout
    assert "7 days, newest 100 runs" in shown
    assert server.json("jobs", "get", "data/kept")["retention"] == {"keep_days": 7, "keep_runs": 100}
    server.run("jobs", "create", "--team", "data", "--name", "plain", "--schedule", "0 3 * * *",
               "--http", "https://hooks.example.com/x")  # fmt: skip
    assert "server default" in server.run("jobs", "get", "data/plain").stdout
