"""API tokens (cronwheel.auth.tokens): 256 random bits, found by id, kept as a digest, judged at a time."""

from __future__ import annotations

import hashlib
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from cronwheel.auth.identity import CallerKind, Scope
from cronwheel.auth.tokens import TOUCH_EVERY, check, issue, token_id
from cronwheel.errors import InvalidInputError, UnauthenticatedError

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def test_a_token_has_a_public_id_and_256_random_bits_and_only_its_digest_is_kept() -> None:
    record, text = issue("ci", "data", [Scope.READ], NOW)
    prefix, found_id, secret = text.split("_", 2)
    assert (prefix, found_id) == ("cw", record.id)
    assert len(secret) == 43  # base64url of 32 bytes
    assert token_id(text) == record.id
    assert record.digest == hashlib.sha256(text.encode()).hexdigest()
    assert text not in repr(record)
    others = {issue("ci", "data", [Scope.READ], NOW)[1] for _ in range(100)}
    assert len(others) == 100


@pytest.mark.parametrize(
    "text",
    ["", "Bearer", "eyJhbGciOi.eyJzdWIi.sig", "cw_", "cw_0123456789ab", "cw_0123456789AB_" + "a" * 43,
     "cw_0123456789ab_" + "a" * 42, "cw_0123456789ab_" + "a" * 44, "cw_0123456789ab_" + "a" * 42 + "="],
)  # fmt: skip
def test_anything_else_has_no_token_id(text: str) -> None:
    assert token_id(text) is None


def test_check_accepts_the_token_and_names_its_caller() -> None:
    record, text = issue("deploy", "data", [Scope.TRIGGER, Scope.READ], NOW)
    caller = check(record, text, NOW)
    assert (caller.kind, caller.id, caller.name) == (CallerKind.TOKEN, record.id, "deploy")
    assert caller.scopes == {Scope.TRIGGER, Scope.READ}
    assert caller.teams == frozenset({"data"})
    every, every_text = issue("root", None, [Scope.ADMIN], NOW)
    assert check(every, every_text, NOW).teams is None


def test_unknown_ids_and_wrong_secrets_are_told_apart_from_nothing() -> None:
    record, text = issue("ci", "data", [Scope.READ], NOW)
    forged = text[:-1] + ("A" if text[-1] != "A" else "B")
    for stored, presented in ((None, text), (record, forged)):
        with pytest.raises(UnauthenticatedError) as refused:
            check(stored, presented, NOW)
        assert str(refused.value) == "invalid token"


def test_expired_and_revoked_tokens_are_refused_from_their_instant_on() -> None:
    record, text = issue("ci", "data", [Scope.READ], NOW, expires_at=NOW + timedelta(hours=1))
    check(record, text, NOW + timedelta(minutes=59))
    with pytest.raises(UnauthenticatedError, match=f"token {record.id} is expired"):
        check(record, text, NOW + timedelta(hours=1))
    revoked = replace(record, revoked_at=NOW)
    with pytest.raises(UnauthenticatedError, match="is revoked"):
        check(revoked, text, NOW)


def test_a_token_needs_a_scope_and_a_future_expiry() -> None:
    with pytest.raises(InvalidInputError, match="at least one scope"):
        issue("ci", "data", [], NOW)
    with pytest.raises(InvalidInputError, match="in the future"):
        issue("ci", "data", [Scope.READ], NOW, expires_at=NOW)


def test_last_use_is_stale_after_a_minute() -> None:
    record, _ = issue("ci", "data", [Scope.READ], NOW)
    assert record.needs_touch(NOW)
    used = replace(record, last_used_at=NOW)
    assert not used.needs_touch(NOW + TOUCH_EVERY - timedelta(microseconds=1))
    assert used.needs_touch(NOW + TOUCH_EVERY)
