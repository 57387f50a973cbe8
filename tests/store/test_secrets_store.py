"""The Store contract for team secrets, on every backend (SQLite and PostgreSQL): one row per
(team, name), sealed bytes kept exactly, replace keeps ``created_at``, pages by name, and a
re-encryption that never overwrites a value set meanwhile."""

from __future__ import annotations

import asyncio

import pytest

from cronwheel.clock import ManualClock
from cronwheel.errors import InvalidInputError, NotFoundError
from cronwheel.model import CommandTarget, HttpTarget, SecretRef
from cronwheel.store.port import StoredSecret
from cronwheel.store.sql import SqlStore
from cronwheel.targets import kinds

from .support import START, at, make_job

SEALED = bytes([1]) + bytes(range(256))  # every byte value survives the round trip


def secret(
    name: str = "api-key", team: str = "billing", key_id: str = "k1", value: bytes = SEALED
) -> StoredSecret:
    return StoredSecret(team, name, key_id, value)


async def test_put_creates_then_replaces_keeping_created_at(store: SqlStore, clock: ManualClock) -> None:
    stored, created = await store.put_secret(secret())
    assert created is True
    assert (stored.team, stored.name, stored.key_id, stored.value) == ("billing", "api-key", "k1", SEALED)
    assert stored.created_at == stored.updated_at == START
    clock.set(at(5))
    replaced, created = await store.put_secret(secret(key_id="k2", value=b"\x01other"))
    assert created is False
    assert (replaced.key_id, replaced.value) == ("k2", b"\x01other")
    assert (replaced.created_at, replaced.updated_at) == (START, at(5))
    assert (await store.get_secrets("billing", ["api-key"]))["api-key"] == replaced


async def test_racing_first_writes_of_one_name_leave_one_row(store: SqlStore) -> None:
    results = await asyncio.gather(*(store.put_secret(secret(value=bytes([1, n]))) for n in range(8)))
    assert sum(created for _, created in results) >= 1
    page = await store.list_secrets("billing")
    assert [item.name for item in page.items] == ["api-key"]
    assert page.items[0].value in {bytes([1, n]) for n in range(8)}


async def test_get_secrets_reads_only_the_team_and_names_asked(store: SqlStore) -> None:
    await store.put_secret(secret("a"))
    await store.put_secret(secret("b"))
    await store.put_secret(secret("a", team="payments", value=b"\x01theirs"))
    found = await store.get_secrets("billing", ["a", "missing", "a"])
    assert list(found) == ["a"]
    assert found["a"].value == SEALED
    assert await store.get_secrets("billing", []) == {}
    many = [f"s{n:04}" for n in range(600)]  # more than one IN-list chunk
    for name in many[:3]:
        await store.put_secret(secret(name))
    assert sorted(await store.get_secrets("billing", many)) == many[:3]


async def test_list_pages_by_name_within_the_team(store: SqlStore) -> None:
    for name in ["c", "a", "e", "b", "d"]:
        await store.put_secret(secret(name))
    await store.put_secret(secret("z", team="payments"))
    first = await store.list_secrets("billing", limit=2)
    assert [item.name for item in first.items] == ["a", "b"]
    assert first.next_cursor is not None
    second = await store.list_secrets("billing", limit=2, cursor=first.next_cursor)
    third = await store.list_secrets("billing", limit=2, cursor=second.next_cursor)
    assert [item.name for item in second.items + third.items] == ["c", "d", "e"]
    assert third.next_cursor is None
    assert (await store.list_secrets("nobody")).items == []
    with pytest.raises(InvalidInputError, match="cursor"):
        await store.list_secrets("billing", cursor="not-a-cursor")


async def test_delete_returns_the_secret_and_then_it_is_gone(store: SqlStore) -> None:
    await store.put_secret(secret())
    assert (await store.delete_secret("billing", "api-key")).value == SEALED
    assert await store.get_secrets("billing", ["api-key"]) == {}
    with pytest.raises(NotFoundError, match="no secret named 'api-key'"):
        await store.delete_secret("billing", "api-key")


async def test_secrets_to_rekey_are_those_under_other_keys_in_team_name_order(store: SqlStore) -> None:
    await store.put_secret(secret("b", team="t1", key_id="k1"))
    await store.put_secret(secret("a", team="t2", key_id="k1"))
    await store.put_secret(secret("a", team="t1", key_id="k0"))
    await store.put_secret(secret("c", team="t1", key_id="k2"))  # already under the newest
    first = await store.secrets_to_rekey("k2", limit=2)
    assert [(s.team, s.name) for s in first] == [("t1", "a"), ("t1", "b")]
    rest = await store.secrets_to_rekey("k2", after=("t1", "b"), limit=2)
    assert [(s.team, s.name) for s in rest] == [("t2", "a")]


async def test_rekey_replaces_only_the_value_read_and_keeps_updated_at(
    store: SqlStore, clock: ManualClock
) -> None:
    read, _ = await store.put_secret(secret())
    clock.set(at(10))
    assert await store.rekey_secret(read, "k2", b"\x01rekeyed") is True
    now = (await store.get_secrets("billing", ["api-key"]))["api-key"]
    assert (now.key_id, now.value, now.updated_at) == ("k2", b"\x01rekeyed", START)
    # a value set between the read and the rewrite wins: the stale rewrite changes nothing
    stale, _ = await store.put_secret(secret(value=b"\x01v1"))
    await store.put_secret(secret(value=b"\x01v2"))
    assert await store.rekey_secret(stale, "k3", b"\x01lost") is False
    assert (await store.get_secrets("billing", ["api-key"]))["api-key"].value == b"\x01v2"
    gone = secret("never-stored")
    assert await store.rekey_secret(gone, "k3", b"\x01x") is False


async def test_jobs_keep_their_references_as_references(store: SqlStore) -> None:
    """A job holds the names of its secrets, never their values: the row says ``{"secret":
    name}`` where a plain value would be, and reads back the same records."""
    http = HttpTarget(
        "https://example.com/hook",
        headers=(("X-Plain", "visible"), ("Authorization", SecretRef("billing-api-key"))),
        signing_secret=SecretRef("hook-signing"),
    )
    command = CommandTarget(("/bin/true",), env=(("TOKEN", SecretRef("token")), ("MODE", "fast")))
    for target in (http, command):
        job = await store.create_job(make_job(name=target.type, target=target))
        assert (await store.get_job(job.id)).target == target
    row = kinds.target_to_json(http)
    assert row["headers"] == [["X-Plain", "visible"], ["Authorization", {"secret": "billing-api-key"}]]
    assert row["signing_secret"] == {"secret": "hook-signing"}


def test_rows_written_before_references_existed_read_as_before() -> None:
    old_row = {
        "type": "http",
        "url": "https://x",
        "method": "POST",
        "headers": [["A", "1"]],
        "expected_status": [],
    }
    assert kinds.target_from_json(old_row) == HttpTarget("https://x", headers=(("A", "1"),))
    assert "signing_secret" not in kinds.target_to_json(HttpTarget("https://x"))
