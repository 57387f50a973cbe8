"""Callers, scopes and teams (cronwheel.auth.identity): another team's object is absent (404), a
missing scope is forbidden (403), admin includes every scope."""

from __future__ import annotations

import pytest

from cronwheel.auth.identity import TRUSTED, Caller, CallerKind, Scope
from cronwheel.errors import ForbiddenError, NotFoundError


def token(*scopes: Scope, teams: frozenset[str] | None = frozenset({"data"})) -> Caller:
    return Caller(CallerKind.TOKEN, "t1", "ci", frozenset(scopes), teams)


def test_another_teams_object_is_absent_whatever_the_scope() -> None:
    with pytest.raises(NotFoundError, match="job not found"):
        token(Scope.ADMIN).require(Scope.READ, "billing", what="job")


def test_a_missing_scope_is_forbidden_on_the_callers_own_team() -> None:
    reader = token(Scope.READ)
    reader.require(Scope.READ, "data")
    with pytest.raises(ForbiddenError, match="'write'"):
        reader.require(Scope.WRITE, "data")
    with pytest.raises(ForbiddenError):
        token(Scope.WRITE).require(Scope.TRIGGER, "data")


def test_admin_includes_every_scope_and_none_teams_means_all() -> None:
    admin = token(Scope.ADMIN, teams=None)
    for scope in Scope:
        admin.require(scope, "any-team")
    assert TRUSTED.sees("x")
    assert TRUSTED.has(Scope.TRIGGER)
    assert token(Scope.READ).visible(["data", "billing"]) == ["data"]
