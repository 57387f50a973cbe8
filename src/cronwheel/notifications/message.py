"""A notification: what happened to which job, with a stable id, and its renderings per channel.

The id is a digest of (job, event, what it is about: the run, or the missed slot), so a
notification written twice (a retry of the transaction, two leaders for a moment) keeps its id,
and receivers de-duplicate on it: it is the ``webhook-id`` header of webhooks, and the
``Message-ID`` of emails.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cronwheel.notifications.rules import Channel, Event, Rule, channel_to_json

_HEADLINES = {
    Event.FAILURE: "failed",
    Event.RECOVERY: "recovered",
    Event.MISSED: "missed its deadline (dead-man's switch)",
    Event.BACK: "is back: a slot completed again",
    Event.LATE: "fired late",
    Event.TEST: "test notification",
}


def notification_id(job_id: str | None, event: Event, subject: str) -> str:
    digest = hashlib.sha256(f"{job_id}|{event.value}|{subject}".encode()).hexdigest()
    return f"ntf_{digest[:32]}"


def channel_key(channel: Channel) -> str:
    """A short stable digest of a channel (the outbox row of a notification for that channel)."""
    text = repr(sorted(channel_to_json(channel).items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Notification:
    id: str
    event: Event
    team: str
    job_id: str | None
    job_name: str | None
    at: datetime  # when it was decided
    run_id: str | None = None
    slot: datetime | None = None
    state: str | None = None  # the run's state, when about a run
    detail: str | None = None

    @property
    def text(self) -> str:
        """One line for people (Slack's ``text``, the email's subject and first line)."""
        who = f"{self.team}/{self.job_name}" if self.job_name else self.team
        line = f"cronwheel: job {who} {_HEADLINES[self.event]}"
        if self.slot is not None:
            line += f" (slot {self.slot.isoformat()})"
        if self.detail:
            line += f": {self.detail}"
        return line

    def to_json(self) -> dict[str, Any]:
        """The webhook body (and the outbox's copy)."""
        return {
            "type": "cronwheel.notification",
            "id": self.id,
            "event": self.event.value,
            "team": self.team,
            "job": None if self.job_id is None else {"id": self.job_id, "name": self.job_name},
            "run_id": self.run_id,
            "slot": None if self.slot is None else self.slot.isoformat(),
            "state": self.state,
            "detail": self.detail,
            "at": self.at.isoformat(),
            "text": self.text,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Notification:
        job = data.get("job") or {}
        slot = data.get("slot")
        return cls(
            id=data["id"],
            event=Event(data["event"]),
            team=data["team"],
            job_id=job.get("id"),
            job_name=job.get("name"),
            at=datetime.fromisoformat(data["at"]),
            run_id=data.get("run_id"),
            slot=None if slot is None else datetime.fromisoformat(slot),
            state=data.get("state"),
            detail=data.get("detail"),
        )


@dataclass(frozen=True, slots=True)
class Delivery:
    """One notification to one channel, as the outbox holds it until it is delivered."""

    id: str  # "<notification id>:<channel key>"
    notification: Notification
    channel: Channel
    attempts: int = 0  # made so far


@dataclass(frozen=True, slots=True)
class Observation:
    """What was just seen of a job: aspects of its state, and what the notification is about."""

    job_id: str
    team: str
    job_name: str
    rules: tuple[Rule, ...]
    health: dict[str, str]
    subject: str  # the run id, or the missed slot: part of the notification id
    run_id: str | None = None
    slot: datetime | None = None
    state: str | None = None
    detail: str | None = None
