"""Fields of a job that a caller may not set: refused with 403, never silently dropped.

* ``team``: a job goes only into a team of the caller's (creating one in another team, or moving
  one there, is a 403; the job it edits was already found among the caller's teams, or was a 404).
* Reserved targets (:attr:`~cronwheel.api.callers.access.AccessPolicy.admin_only`): a command, a python
  function, or an HTTP or broker target that only an operator-allowed non-public network makes acceptable
  (``--allow-network``). Only an admin of every team may set one; anyone else may still edit the
  other fields of a job that has one, since keeping the target unchanged is not setting it.

What "needs an allowed network" means is the target policy's own answer (the same check, once with
the operator's networks and once without), so that it follows every host spelling the policy
knows. A host *name* is resolved only at attempt time, by the worker, which cannot tell who wrote
the job: a name that resolves into an allowed network is not reserved here (docs/security.md).
"""

from __future__ import annotations

from dataclasses import replace

from cronwheel.api.services import ApiServices
from cronwheel.auth.identity import Caller, Scope
from cronwheel.errors import ForbiddenError, InvalidInputError
from cronwheel.jobs.service import TargetPolicy
from cronwheel.model import (
    Job,
    Target,
)
from cronwheel.targets.kinds import kind_of


def check_settable(caller: Caller, job: Job, stored: Job | None, services: ApiServices) -> None:
    """Refuse (403) ``job`` (to be created, or to replace ``stored``) if ``caller`` may not set
    its team or its target."""
    if not caller.sees(job.team):
        raise ForbiddenError(f"this {caller.kind} may not put jobs in team {job.team!r}")
    reserved = services.access.admin_only
    if not reserved or (caller.teams is None and caller.has(Scope.ADMIN)):
        return
    if stored is not None and stored.target == job.target:
        return
    kind = reserved_kind(job.target, services.job_service.policy)
    if kind in reserved:
        raise ForbiddenError(
            f"{_WHAT[kind]} are reserved to admins of every team on this server (--admin-only {kind})"
        )


_WHAT = {
    "command": "command targets",
    "python": "python targets",
    "network": "targets in a non-public network",
}


def reserved_kind(target: Target, policy: TargetPolicy) -> str | None:
    """What the operator allowed that ``target`` uses: ``command``, ``python``, ``network`` (an
    HTTP or broker target the policy accepts only thanks to an allowed network), or None. A target the
    policy refuses is None: it is refused whoever asks (422, from the service)."""
    try:
        policy.check(target)
    except InvalidInputError:
        return None
    kind = kind_of(target)
    if kind.reserved:
        return kind.tag
    if policy.allowed_networks and kind.addresses(target):
        try:
            replace(policy, allowed_networks=()).check(target)
        except InvalidInputError:
            return "network"
    return None
