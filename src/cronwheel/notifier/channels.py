"""Sending one notification to one channel.

* ``webhook`` and ``slack``: through the worker's HTTP executor
  (:class:`~cronwheel.worker.executors.http.HttpExecutor`), so the same SSRF guard (refused
  addresses, checked again on every resolved address and socket), the same Standard Webhooks
  signature (``webhook-id`` is the notification's id), no redirects, no proxy from the
  environment. A webhook's body is the notification's JSON; Slack's is ``{"text": ...}``. A
  channel whose URL is a secret reference has it resolved first (the executor's
  :class:`~cronwheel.secrets.resolve.SecretResolver`), and the resolved URL goes through every
  check a target URL does at its attempts (what the HTTP client refuses, the SSRF guard); a
  secret that cannot be had fails the delivery saying which, and no value is kept in the reason.
* ``email``: over the server's SMTP relay (:class:`SmtpSettings`), with the stdlib ``smtplib`` in a
  thread; the ``Message-ID`` is the notification's id. The password is never logged nor repr'd.

:meth:`Senders.send` returns None when delivered, else why not (a line for logs and the outbox).
"""

from __future__ import annotations

import asyncio
import smtplib
import ssl
from dataclasses import dataclass, field
from email.message import EmailMessage
from urllib.parse import parse_qs, unquote, urlsplit

from cronwheel.clock import Clock, SystemClock
from cronwheel.errors import InvalidInputError, TransientError
from cronwheel.model import HttpTarget, Outcome, SecretRef
from cronwheel.notifications.message import Notification
from cronwheel.notifications.rules import Channel, EmailChannel, SlackChannel, WebhookChannel, http_target
from cronwheel.secrets.resolve import NOTHING, Resolved, SecretUnavailableError
from cronwheel.worker.executors.base import AttemptContext
from cronwheel.worker.executors.http import HttpExecutor

TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class SmtpSettings:
    """The relay email notifications go through: ``smtp://[user:password@]host[:port]?from=ADDR``
    (``smtps://`` for implicit TLS, ``?starttls=1`` to upgrade a plain connection)."""

    host: str
    port: int = 25
    sender: str = "cronwheel@localhost"
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: bool = False  # smtps: TLS from the first byte
    starttls: bool = False

    @classmethod
    def from_url(cls, url: str) -> SmtpSettings:
        parts = urlsplit(url)
        if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
            raise InvalidInputError("the SMTP URL must be smtp://[user:password@]host[:port]?from=ADDRESS")
        query = parse_qs(parts.query)
        try:
            port = parts.port or (465 if parts.scheme == "smtps" else 25)
        except ValueError:
            raise InvalidInputError("the SMTP URL has an invalid port") from None
        return cls(
            host=parts.hostname,
            port=port,
            sender=query.get("from", ["cronwheel@localhost"])[0],
            username=None if parts.username is None else unquote(parts.username),
            password=None if parts.password is None else unquote(parts.password),
            tls=parts.scheme == "smtps",
            starttls=query.get("starttls", ["0"])[0] in ("1", "true", "yes"),
        )


class Senders:
    def __init__(
        self, http: HttpExecutor, smtp: SmtpSettings | None = None, clock: Clock | None = None
    ) -> None:
        self.http = http
        self.smtp = smtp
        self.clock: Clock = clock or SystemClock()

    async def send(self, notification: Notification, channel: Channel, attempt: int = 1) -> str | None:
        if isinstance(channel, EmailChannel):
            return await self._email(notification, channel)
        payload = {"text": notification.text} if isinstance(channel, SlackChannel) else notification.to_json()
        context = AttemptContext(
            execution_id=notification.id,
            job_id=notification.job_id or "",
            job_name=notification.job_name or "",
            team=notification.team,
            scheduled_at=notification.slot or notification.at,
            attempt=attempt,
            timeout_s=TIMEOUT_S,
            payload=payload,
        )
        try:
            target, resolved = await self._target(channel, notification.team)
        except SecretUnavailableError as error:
            return f"{channel.type} channel url: {error}"
        except TransientError:
            return f"{channel.type} channel url: its secret could not be read: the store is unavailable"
        result = resolved.redacted(await self.http.execute(target, context))
        if result.outcome is Outcome.SUCCESS:
            return None
        return result.error or f"{result.outcome.value} (status {result.status_code})"

    async def _target(self, channel: WebhookChannel | SlackChannel, team: str) -> tuple[HttpTarget, Resolved]:
        """The request to make, with the URL a reference names resolved (and the secret, to
        redact its value from what the attempt returns)."""
        if not isinstance(channel.url, SecretRef):
            return http_target(channel), NOTHING
        name = channel.url.name
        resolved = await self.http.secrets.resolve(team, [name])
        return http_target(channel, resolved.values[name]), resolved

    async def _email(self, notification: Notification, channel: EmailChannel) -> str | None:
        if self.smtp is None:
            return "no SMTP relay is configured on this server (--smtp-url / CRONWHEEL_SMTP_URL)"
        message = EmailMessage()
        message["From"] = self.smtp.sender
        message["To"] = ", ".join(channel.to)
        message["Subject"] = " ".join(notification.text.split())[:200]  # one line, whatever a reason holds
        message["Message-ID"] = f"<{notification.id}@cronwheel>"
        body = [notification.text, ""]
        body += [f"{key}: {value}" for key, value in notification.to_json().items() if key != "text"]
        message.set_content("\n".join(body) + "\n")
        try:
            await asyncio.to_thread(_send_mail, self.smtp, message)
        except (OSError, ValueError, smtplib.SMTPException) as error:  # ValueError: a header email refuses
            return f"SMTP {self.smtp.host}:{self.smtp.port}: {type(error).__name__}: {error}"
        return None


def _send_mail(smtp: SmtpSettings, message: EmailMessage) -> None:
    factory = smtplib.SMTP_SSL if smtp.tls else smtplib.SMTP
    with factory(smtp.host, smtp.port, timeout=TIMEOUT_S) as client:
        if smtp.starttls:
            client.starttls(context=ssl.create_default_context())
        if smtp.username is not None:
            client.login(smtp.username, smtp.password or "")
        client.send_message(message)
