"""The operator's access settings for one API, and the seam every way of authenticating plugs into.

Kept apart from :mod:`cronwheel.api.callers.auth` (which needs the app's services) so that
:class:`~cronwheel.api.services.ApiServices` can name them without an import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from cronwheel.auth.identity import Caller

RESERVABLE = ("command", "python", "network")  # what --admin-only can reserve (see AccessPolicy)


class Authenticator(Protocol):
    """One way of turning a bearer credential into a :class:`Caller` (API tokens; OIDC JWTs).

    ``authenticate`` answers None for a credential that is not of its kind (the next
    authenticator is asked), the caller for a valid one, and raises
    :class:`~cronwheel.errors.UnauthenticatedError` for one of its kind that is not valid
    (unknown, wrong, expired, revoked): a credential is judged by exactly one authenticator."""

    async def authenticate(self, credential: str) -> Caller | None: ...


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """Who may reach this API, and what only some callers may set.

    * ``allowed_hosts``: ``Host`` names served besides the ones always served (IP literals,
      ``localhost`` and ``*.localhost``, which no DNS-rebinding page can be named). An entry is a
      name, ``*.example.com`` (its subdomains) or ``*`` (any host: a proxy in front checks it).
      Pages on these names (their ``Origin``) may also make state-changing requests.
    * ``protect_metrics``: ``/metrics`` needs a token of every team with the ``read`` scope.
    * ``admin_only``: target kinds (``command``, ``python``, ``network``: an HTTP target that only
      an operator-allowed non-public network makes acceptable) that only an admin of every team
      may set on a job; anyone else gets 403.
    """

    allowed_hosts: tuple[str, ...] = ()
    protect_metrics: bool = False
    admin_only: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        unknown = sorted(self.admin_only - set(RESERVABLE))
        if unknown:
            raise ValueError(f"admin_only takes {', '.join(RESERVABLE)}, not {', '.join(unknown)}")
