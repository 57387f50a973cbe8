"""Who is calling, and what they may do: the one definition of a caller, its scopes and its teams
(guarantee 8, docs/guarantees.md: teams are walls).

Every API request is made by a :class:`Caller`: an API token, an OIDC subject, or, where the
operator turned authentication off (tests, and only those), :data:`TRUSTED`. A caller has
scopes (:class:`Scope`) and teams (``None``: every team, which only an admin token has). Routes
ask :meth:`Caller.require` before they act:

* a scope the caller lacks is refused with :class:`~cronwheel.errors.ForbiddenError` (403): the
  caller may see the object, but not do this to it;
* a team the caller does not belong to answers :class:`~cronwheel.errors.NotFoundError` (404),
  exactly as if the object did not exist, so that one team cannot even learn another's job names.

The records here are pure (no store, no clock): how a caller is authenticated lives in
``cronwheel.api``, what it is allowed in here.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from cronwheel.errors import ForbiddenError, HiddenError


class Scope(enum.StrEnum):
    """What a caller may do. Each scope includes none of the others, except ``admin``, which
    includes them all (and the management of tokens and of every team)."""

    READ = "read"  # jobs, runs, secrets' names of the caller's teams
    WRITE = "write"  # create, edit, pause, resume, delete jobs; set and delete secrets
    TRIGGER = "trigger"  # run a job now
    ADMIN = "admin"  # everything, tokens and the audit log of the caller's teams included


class CallerKind(enum.StrEnum):
    TOKEN = "token"  # noqa: S105 - a kind of caller, not a secret
    OIDC = "oidc"
    TRUSTED = "trusted"  # authentication turned off by the operator: no walls


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated caller. ``teams`` is ``None`` for every team."""

    kind: CallerKind
    id: str  # the token id, or the OIDC subject
    name: str  # the token's name, or the subject's display name, for the audit log
    scopes: frozenset[Scope]
    teams: frozenset[str] | None

    def has(self, scope: Scope) -> bool:
        return Scope.ADMIN in self.scopes or scope in self.scopes

    def sees(self, team: str) -> bool:
        """Whether objects of ``team`` exist for this caller."""
        return self.teams is None or team in self.teams

    def require(self, scope: Scope, team: str | None = None, *, what: str = "object") -> None:
        """Refuse unless the caller may ``scope`` objects of ``team``: another team's object is
        a 404 (``what`` names it, as a missing one would be named), a missing scope a 403."""
        if team is not None and not self.sees(team):
            raise HiddenError(f"{what} not found")  # a 404 like any other (the audit log tells)
        if not self.has(scope):
            raise ForbiddenError(f"this {self.kind} lacks the {scope.value!r} scope")

    def visible(self, teams: Iterable[str]) -> list[str]:
        """The teams of ``teams`` this caller sees."""
        return [team for team in teams if self.sees(team)]


TRUSTED = Caller(CallerKind.TRUSTED, "trusted", "trusted", frozenset({Scope.ADMIN}), None)
"""The caller of an API whose operator turned authentication off (tests only)."""
