"""``jobs list --watch`` and ``runs list --watch`` against a real server: the listing is printed
again when it changes (and only then), and Ctrl-C ends the watch with exit 0.

The in-process tests replace the pause between two requests with a step of the test (change
something through the API, or press Ctrl-C), so no test waits for time to pass; one test runs the
real ``cronwheel`` program, which waits for real, and stops it with SIGINT."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from cronwheel.cli import watching
from cronwheel.client import Client

from .conftest import Server

HOOK = "https://hooks.example.com/"


def spec(name: str) -> dict[str, Any]:
    return {
        "team": "data",
        "name": name,
        "schedule": "0 3 * * *",
        "target": {"type": "http", "url": HOOK + name},
    }


def steps(monkeypatch: pytest.MonkeyPatch, *actions: Callable[[], object]) -> list[float]:
    """Each pause of the watch runs the next action; after the last, Ctrl-C. Returns the pauses."""
    pauses: list[float] = []
    pending = list(actions)

    def pause(seconds: float) -> None:
        pauses.append(seconds)
        if not pending:
            raise KeyboardInterrupt
        pending.pop(0)()

    monkeypatch.setattr(watching, "pause", pause)
    return pauses


def test_jobs_list_watch_prints_again_when_a_job_appears(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Client(server.url, server.token) as client:
        pauses = steps(monkeypatch, lambda: client.create_job(spec("nightly")), lambda: None)
        result = server.run("jobs", "list", "--watch")
    assert result.exit_code == 0, result.stderr
    first, second = result.stdout.split("\n\n")  # the unchanged third listing is not printed
    assert first == "no jobs"
    assert " nightly " in second.splitlines()[1]
    assert pauses == [2.0, 2.0, 2.0]  # the default interval


def test_runs_list_watch_shows_a_triggered_run_and_its_change(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Client(server.url, server.token) as client:
        job = client.create_job(spec("nightly"))
        runs: list[str] = []
        steps(
            monkeypatch,
            lambda: runs.append(client.trigger_job(job["id"]).run["id"]),
            lambda: client.pause_job(job["id"]),  # the runs do not change: nothing printed
        )
        result = server.run("runs", "list", "--watch", "--interval", "500ms", "-o", "wide")
    assert result.exit_code == 0, result.stderr
    listings = result.stdout.split("\n\n")
    assert listings[0] == "no runs"
    assert len(listings) == 2
    assert listings[1].splitlines()[1].startswith(runs[0])
    assert "QUEUE" in listings[1].splitlines()[0]


def test_watch_as_json_prints_a_document_per_change(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    with Client(server.url, server.token) as client:
        steps(monkeypatch, lambda: client.create_job(spec("a")), lambda: client.create_job(spec("b")))
        result = server.run("jobs", "list", "-w", "-o", "json")
    assert result.exit_code == 0, result.stderr
    documents = [json.loads(text) for text in result.stdout.split("\n\n")]
    assert [[job["name"] for job in doc["items"]] for doc in documents] == [[], ["a"], ["a", "b"]]


def test_watch_options_are_checked(server: Server) -> None:
    alone = server.run("jobs", "list", "--interval", "5")
    assert alone.exit_code == 2
    assert "--interval goes with --watch" in alone.stderr
    zero = server.run("runs", "list", "--watch", "--interval", "0")
    assert zero.exit_code == 2
    assert "--interval: must be more than 0 seconds" in zero.stderr


def test_a_terminal_gets_each_listing_on_a_cleared_screen() -> None:
    assert watching.frame("no jobs", first=True, terminal=True) == watching.CLEAR + "no jobs"
    assert watching.frame("x", first=False, terminal=True) == watching.CLEAR + "x"
    assert watching.frame("x", first=False, terminal=False) == "\nx"


def read_until(process: subprocess.Popen[bytes], text: str, seconds: float = 30.0) -> str:
    """What the process printed from the last call on up to ``text`` (failing after ``seconds``)."""
    assert process.stdout is not None
    printed = b""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while text.encode() not in printed:
            assert selector.select(seconds), f"no {text!r} within {seconds}s; printed: {printed!r}"
            chunk = os.read(process.stdout.fileno(), 65536)
            assert chunk, f"the watch ended; printed: {printed!r}"
            printed += chunk
    return printed.decode()


def test_the_program_watches_until_ctrl_c_and_exits_0(server: Server) -> None:
    env = {**os.environ, **{k: v for k, v in server.environment().items() if v is not None}}
    env = {k: v for k, v in env.items() if k not in ("CRONWHEEL_URL", "CRONWHEEL_TOKEN", "CRONWHEEL_CONTEXT")}
    args = [
        sys.executable,
        "-m",
        "cronwheel",
        "--url",
        server.url,
        "jobs",
        "list",
        "--watch",
        "--interval",
        "0.2",
    ]
    process = subprocess.Popen(
        [*args, "--token", server.token], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    try:
        assert read_until(process, "no jobs") == "no jobs\n"
        with Client(server.url, server.token) as client:
            client.create_job(spec("nightly"))
        listing = read_until(process, " nightly ")
        assert listing.startswith("\nID ")  # the next listing, after a blank line
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 0, stderr
    assert b"Aborted" not in stderr
