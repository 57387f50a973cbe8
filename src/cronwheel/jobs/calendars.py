"""Calendar operations shared by the API, gRPC and anything else that edits calendars.

A calendar's edit rewrites, in the store's transaction, the resolved spec of every job that lists
it; this service then tells the schedulers of this process about those jobs at once (a cluster's
other nodes hear of them through the store's change notifications), as a job edit does.
"""

from __future__ import annotations

from cronwheel.audit import Actor, AuditAction, AuditEntry
from cronwheel.clock import Clock
from cronwheel.jobs.service import ChangeListener
from cronwheel.model import Calendar
from cronwheel.store import Page, Store


class CalendarService:
    """Creates, reads, lists, edits and deletes a team's calendars (validated by the caller:
    :func:`cronwheel.schedule.calendar.check_spec` builds a spec only from valid parts)."""

    def __init__(self, store: Store, changes: ChangeListener, clock: Clock) -> None:
        self.store = store
        self.changes = changes
        self.clock = clock

    async def create(self, calendar: Calendar, actor: Actor | None = None) -> Calendar:
        entry = self._entry(actor, AuditAction.CALENDAR_CREATE, calendar)
        return await self.store.create_calendar(calendar, audit=entry)

    async def get(self, team: str, name: str) -> Calendar:
        return await self.store.get_calendar(team, name)

    async def list(self, team: str, limit: int = 100, cursor: str | None = None) -> Page[Calendar]:
        return await self.store.list_calendars(team, limit, cursor)

    async def update(
        self, calendar: Calendar, expected_version: int | None = None, actor: Actor | None = None
    ) -> Calendar:
        """Replace the calendar's description and spec; the jobs that list it reload."""
        current = await self.store.get_calendar(calendar.team, calendar.name)
        same = (current.description, current.spec) == (calendar.description, calendar.spec)
        if same and expected_version in (None, current.version):
            return current  # nothing changes: nothing written, the version kept
        entry = self._entry(actor, AuditAction.CALENDAR_UPDATE, calendar)
        updated, job_ids = await self.store.update_calendar(calendar, expected_version, audit=entry)
        for job_id in job_ids:
            self.changes.job_changed(job_id)
        return updated

    async def delete(self, team: str, name: str, actor: Actor | None = None) -> Calendar:
        """Delete a calendar that no live job lists (409 naming those that do)."""
        entry = None
        if actor is not None:
            entry = actor.entry(
                AuditAction.CALENDAR_DELETE, self.clock.now(), team, ("calendar", f"{team}/{name}", name)
            )
        return await self.store.delete_calendar(team, name, audit=entry)

    def _entry(self, actor: Actor | None, action: AuditAction, calendar: Calendar) -> AuditEntry | None:
        if actor is None:
            return None
        target = ("calendar", f"{calendar.team}/{calendar.name}", calendar.name)
        return actor.entry(action, self.clock.now(), calendar.team, target)
