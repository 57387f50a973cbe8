"""What the API's routes are given (kept apart from ``app`` so that routes can name it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from fastapi import Request

from cronwheel.api.answers import SharedAnswers
from cronwheel.api.callers.access import AccessPolicy, Authenticator
from cronwheel.api.callers.failures import FailedAuthentications
from cronwheel.api.callers.sampling import RefusalSampler
from cronwheel.api.events.hub import ChangeSource, EventHub
from cronwheel.api.guards.rate import RateLimiter
from cronwheel.api.schemas.upcoming import UpcomingKey, UpcomingOut
from cronwheel.clock import Clock, monotonic_of
from cronwheel.cluster.status import ClusterStatus
from cronwheel.jobs.calendars import CalendarService
from cronwheel.jobs.service import JobService
from cronwheel.limits import Limits
from cronwheel.secrets.service import SecretService
from cronwheel.store import JobQuery, Store

UPCOMING_KEPT_S = 5.0  # how long the viewers of the upcoming fires share one count

Readiness = Callable[[], Awaitable[dict[str, bool]]]


@dataclass(frozen=True, slots=True)
class ApiServices:
    """What the API needs: the store (reads, and API tokens), the job service (writes), the
    clock, the readiness checks behind ``/readyz`` (check name -> ready; by default, that the
    store answers), the operator's access settings, and the authenticators tried after the
    store's API tokens (OIDC).

    The process's per-caller rate buckets (``rate_limiter``), failed authentications on them
    (``failures``), audit sampler of refusals (``refusals``) and event streams (``events``,
    fed from ``changes``) are made with it, on its clock, and belong to it: the REST app and the gRPC
    server built from one ``ApiServices`` share them, so a caller has one budget over both. So
    are the upcoming fires' counts (``upcoming``), shared for ``UPCOMING_KEPT_S`` seconds by the
    callers who ask the same window, buckets and teams."""

    store: Store
    job_service: JobService
    clock: Clock
    readiness: Readiness | None = None
    cluster: ClusterStatus | None = None  # GET /v1/cluster (absent in tests that do not need it)
    access: AccessPolicy = field(default_factory=AccessPolicy)
    authenticators: tuple[Authenticator, ...] = ()
    secrets: SecretService | None = None  # /v1/teams/{team}/secrets (absent: those routes answer 503)
    # where this process hears of job changes, for /v1/events (absent: its streams hear of runs only)
    changes: ChangeSource | None = None
    rate_limiter: RateLimiter = field(init=False, compare=False, repr=False)
    failures: FailedAuthentications = field(init=False, compare=False, repr=False)
    refusals: RefusalSampler = field(init=False, compare=False, repr=False)
    events: EventHub = field(init=False, compare=False, repr=False)
    upcoming: SharedAnswers[UpcomingKey, UpcomingOut] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        ticks = monotonic_of(self.clock)
        object.__setattr__(self, "rate_limiter", RateLimiter(ticks))  # frozen: set once, here
        object.__setattr__(self, "failures", FailedAuthentications(self.rate_limiter))
        object.__setattr__(self, "refusals", RefusalSampler(ticks))
        hub = EventHub(self.store, lambda: self.limits, self.changes, self.cluster)
        object.__setattr__(self, "events", hub)
        object.__setattr__(self, "upcoming", SharedAnswers(ticks, UPCOMING_KEPT_S))

    @property
    def calendars(self) -> CalendarService:
        """The calendar service: the store's, telling this process's schedulers of the jobs a
        calendar edit rewrote as the job service does."""
        return CalendarService(self.store, self.job_service.changes, self.clock)

    @property
    def limits(self) -> Limits:
        """The operator's limits: the job service's (one record for the API and the service)."""
        return self.job_service.limits

    async def ready(self) -> dict[str, bool]:
        check = self.readiness if self.readiness is not None else store_readiness(self.store)
        return await check()


def store_readiness(store: Store) -> Readiness:
    """A readiness check that the store answers a trivial query (``{"store": True}``)."""

    async def check() -> dict[str, bool]:
        try:
            await store.list_jobs(JobQuery(limit=1))
        except Exception:
            return {"store": False}
        return {"store": True}

    return check


def get_services(request: Request) -> ApiServices:
    """The services of the app serving ``request`` (a FastAPI dependency)."""
    services = request.app.state.services
    assert isinstance(services, ApiServices)
    return services
