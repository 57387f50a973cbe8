"""The one error root of cronwheel.

Every error cronwheel raises on purpose derives from :class:`CronwheelError`. Subclasses say whether
trying again can help: a :class:`PermanentError` will fail the same way every time (bad input, a
conflict with the stored state), a :class:`TransientError` may pass on a later try (a backend that is
down). Code that retries catches ``TransientError`` only.
"""

from __future__ import annotations

from collections.abc import Iterator

_CAUSE_DEPTH = 6  # drivers wrap an error a few times; a cycle or a long chain stops here


class CronwheelError(Exception):
    """Root of every error cronwheel raises on purpose."""

    retryable: bool = False


class PermanentError(CronwheelError):
    """The same call will fail the same way: do not retry."""


class TransientError(CronwheelError):
    """The call may succeed later (a backend is unreachable, a lease was lost): retry with backoff."""

    retryable = True


class InvalidInputError(PermanentError, ValueError):
    """Input that cronwheel refuses whole; nothing was written."""


class FieldRefusedError(InvalidInputError):
    """Input refused for one field, with a machine-readable ``code`` (the API's problem entry)
    and the problem type ``slug`` and ``title`` the API answers with."""

    slug = "invalid-input"
    title = "Invalid input"

    def __init__(self, field: str, reason: str, code: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason
        self.code = code


class NotFoundError(PermanentError):
    """The job or run does not exist (or was deleted)."""


class HiddenError(NotFoundError):
    """Answered exactly as :class:`NotFoundError` (404), but raised where the object is behind
    another team's wall: the audit log records it (``auth.hidden``), the caller cannot tell."""


class UnauthenticatedError(PermanentError):
    """No credentials, or credentials that are unknown, expired or revoked (HTTP 401)."""


class ForbiddenError(PermanentError):
    """The caller is known but may not do this: a missing scope, a field it may not set (HTTP 403).
    Another team's object is not forbidden but absent (:class:`NotFoundError`), so that teams
    cannot probe each other's names."""


class ConflictError(PermanentError):
    """The write lost a race: the stored version differs from the expected one, or a unique name
    is taken. Re-read and decide again."""


class NotRunningError(ConflictError):
    """The action needs the object running, and it has ended (a backfill done or cancelled):
    ``state`` is the state it ended in."""

    def __init__(self, message: str, state: str) -> None:
        super().__init__(message)
        self.state = state


class RaceLostError(TransientError):
    """The database aborted the transaction for a concurrent one (deadlock, serialization
    failure): nothing was written, and running it again at once usually succeeds."""


class BackendUnavailableError(TransientError):
    """A backend (database, queue, coordinator) cannot be reached right now."""


class QuotaExceededError(PermanentError):
    """A team already holds as many live jobs as the operator allows (HTTP 409): the request is
    fine, the team is full. Trying again fails the same way until a job of the team is deleted or
    the operator raises the quota (``--max-jobs-per-team``)."""

    def __init__(self, team: str, quota: int) -> None:
        super().__init__(
            f"team {team!r} already has {quota} live jobs, the most this server allows a team "
            "(--max-jobs-per-team); delete one first"
        )
        self.team = team
        self.quota = quota


class RateLimitedError(TransientError):
    """A caller made more requests than its rate allows (HTTP 429): the same request succeeds
    after ``retry_after_s`` seconds."""

    def __init__(
        self, retry_after_s: int, rate_per_s: float, burst: int, what: str = "requests from this caller"
    ) -> None:
        super().__init__(
            f"too many {what}: this server allows {rate_per_s:g} a second (bursts of {burst}); "
            f"try again in {retry_after_s} s"
        )
        self.retry_after_s = retry_after_s


def causes(error: BaseException | None) -> Iterator[BaseException]:
    """``error`` and what lies under it (``__cause__``, else ``__context__``), nearest first, at
    most :data:`_CAUSE_DEPTH` of them: drivers raise their own errors from, or inside the
    ``except`` of, the one that says what happened."""
    for _ in range(_CAUSE_DEPTH):
        if error is None:
            return
        yield error
        error = error.__cause__ or error.__context__
