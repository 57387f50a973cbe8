"""Notifications in ``cronwheel server`` as a user runs it (a subprocess over a SQLite file), with a
webhook sink and an SMTP server (aiosmtpd) on 127.0.0.1: rules set with the CLI; a failing job
notifies the webhook and the mailbox once, and its recovery once; a job whose slots get stuck
raises the dead-man's notification within its deadline; ``notifications test`` sends a sample."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from email import message_from_bytes
from email.message import Message
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from server_harness import ServerProcess, Sink, wait_for

import suite_workers

pytestmark = pytest.mark.integration


class Mailbox:
    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802 (aiosmtpd's name)
        self.messages.append(message_from_bytes(envelope.content))
        return "250 OK"


@pytest.fixture
def mailbox(monkeypatch: pytest.MonkeyPatch) -> Iterator[Mailbox]:
    """An SMTP server on loopback, named to the servers this test starts by CRONWHEEL_SMTP_URL."""
    port = suite_workers.free_port()
    box = Mailbox()
    controller = Controller(box, hostname="127.0.0.1", port=port)
    controller.start()
    monkeypatch.setenv("CRONWHEEL_SMTP_URL", f"smtp://127.0.0.1:{port}?from=cronwheel@example.com")
    try:
        yield box
    finally:
        controller.stop()


def cli(server: ServerProcess, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "cronwheel", *args, "--url", server.url]
    return subprocess.run(
        command, input=stdin, capture_output=True, text=True, timeout=60, check=False, cwd=server.db.parent
    )


def _events(sink: Sink, path: str) -> list[str]:
    return [delivery.body["event"] for delivery in sink.at(path)]


async def test_failure_recovery_and_the_dead_mans_switch_end_to_end(
    server_factory: Callable[..., ServerProcess], sink: Sink, mailbox: Mailbox, tmp_path: Path
) -> None:
    server = server_factory()
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        "- conditions: [failure, recovery]\n"
        f"  channels: [{{type: webhook, url: '{sink.url}/notify'}}, {{type: email, to: [ops@example.com]}}]\n"
        "- conditions: [missed]\n"
        "  deadline_s: 3\n"
        f"  channels: [{{type: webhook, url: '{sink.url}/dms'}}]\n"
    )
    done = cli(server, "notifications", "set", "--team", "ops", str(rules))
    assert done.returncode == 0, done.stderr
    assert "failure,recovery" in done.stdout
    target = sink.answer("/target", (500, 0.0))
    async with server.client() as api:
        body = {
            "team": "ops",
            "name": "flaky",
            "schedule": "* * * * * *",
            "target": {"type": "http", "url": target},
        }
        created = await api.post("/v1/jobs", json=body)
        assert created.status_code == 201, created.text
        job_id = created.json()["id"]
        await wait_for(lambda: len(sink.at("/target")) >= 4, timeout=20)  # four failures in a row
        failed_at = time.time()
        await wait_for(lambda: _events(sink, "/notify"), timeout=10)
        sink.script["/target"] = [(200, 0.0)]
        await wait_for(lambda: "recovery" in _events(sink, "/notify"), timeout=15)
        recovered_at = time.time()
        await wait_for(lambda: len(mailbox.messages) >= 2, timeout=10)
        # stuck slots: the target now hangs past the deadline (3 s), so slots are not terminal in time
        sink.script["/target"] = [(200, 8.0)]
        await wait_for(lambda: _events(sink, "/dms") == ["missed"], timeout=20)
        missed_at = time.time()
        await api.post(f"/v1/jobs/{job_id}/pause", json={"note": "done"})
    assert _events(sink, "/notify") == ["failure", "recovery"]  # once each, though it failed 4+ times
    subjects = [str(m["Subject"]) for m in mailbox.messages[:2]]
    assert subjects[0].startswith("cronwheel: job ops/flaky failed (slot ")
    assert subjects[1].startswith("cronwheel: job ops/flaky recovered (slot ")
    first = sink.at("/notify")[0]
    assert first.headers["webhook-id"] == first.body["id"]
    assert first.body["job"] == {"id": job_id, "name": "flaky"}
    assert mailbox.messages[0]["Message-ID"] == f"<{first.body['id']}@cronwheel>"
    assert sink.at("/notify")[0].at - failed_at < 3  # decided and delivered within a notifier pass or two
    assert sink.at("/notify")[1].at - recovered_at < 3
    assert missed_at > 0

    sent = cli(server, "notifications", "test", "--team", "ops")
    assert sent.returncode == 0, sent.stderr
    await wait_for(lambda: "test" in _events(sink, "/notify"), timeout=10)
    nothing = cli(server, "notifications", "test", "--team", "nobody")
    assert nothing.returncode != 0
    assert "no notification rules apply" in nothing.stderr
    metrics = (await server.client().get("/metrics")).text
    assert 'cronwheel_notifications_sent_total{channel="webhook"}' in metrics
