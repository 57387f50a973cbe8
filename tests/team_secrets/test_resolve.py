"""The worker's side (cronwheel.secrets.resolve): references resolved from a real store (SQLite
in a tmp file) in one read, sealed rows cached briefly, every way of failing a clear
``SecretUnavailableError``, and resolved values redacted from what an attempt keeps."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from cronwheel.clock import ManualClock
from cronwheel.model import AttemptResult, CommandTarget, HttpTarget, Outcome, SecretRef
from cronwheel.secrets.crypto import Keyring, new_key, seal
from cronwheel.secrets.resolve import Resolved, SecretResolver, SecretUnavailableError
from cronwheel.store.port import StoredSecret
from cronwheel.store.sql import SqlStore

START = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
KEYS = Keyring([new_key("k1")])
TOKEN = "tok_9f8e7d6c5b4a"


class CountingStore:
    """The real store, counting the reads the resolver makes."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.reads: list[tuple[str, list[str]]] = []

    async def get_secrets(self, team: str, names: Sequence[str]) -> dict[str, StoredSecret]:
        self.reads.append((team, sorted(names)))
        return await self.store.get_secrets(team, names)


@pytest.fixture
def store_clock() -> None:
    """tests/conftest.py's ``store`` keeps its own clock here (the system's)."""


async def put(store: SqlStore, team: str, name: str, value: str, keyring: Keyring = KEYS) -> None:
    sealed = seal(keyring, team, name, value)
    await store.put_secret(StoredSecret(team, name, sealed.key_id, sealed.value))


async def test_required_and_optional_names_resolve_in_one_read(store: SqlStore) -> None:
    await put(store, "billing", "api-key", TOKEN)
    await put(store, "billing", "webhook-signing", "whsec_x")
    counting = CountingStore(store)
    resolver = SecretResolver(counting, KEYS, clock=ManualClock(START))
    resolved = await resolver.resolve("billing", ["api-key"], ["webhook-signing", "absent"])
    assert resolved.values == {"api-key": TOKEN, "webhook-signing": "whsec_x"}
    assert counting.reads == [("billing", ["absent", "api-key", "webhook-signing"])]
    assert TOKEN not in repr(resolved)


async def test_nothing_needed_reads_nothing(store: SqlStore) -> None:
    counting = CountingStore(store)
    assert (await SecretResolver(counting, KEYS).resolve("billing", [])).values == {}
    assert counting.reads == []


async def test_rows_are_cached_for_the_ttl_found_or_not_then_read_again(store: SqlStore) -> None:
    await put(store, "billing", "api-key", "v1")
    counting, clock = CountingStore(store), ManualClock(START)
    resolver = SecretResolver(counting, KEYS, clock=clock, ttl_s=5.0)
    for _ in range(3):
        await resolver.resolve("billing", ["api-key"], ["webhook-signing"])
    assert len(counting.reads) == 1  # a burst of attempts: one read
    await put(store, "billing", "api-key", "v2")
    assert (await resolver.resolve("billing", ["api-key"])).values == {"api-key": "v1"}  # within the TTL
    clock.advance(5.0)
    assert (await resolver.resolve("billing", ["api-key"])).values == {"api-key": "v2"}
    assert len(counting.reads) == 2
    resolver.forget("billing", "api-key")  # the API of this process changed it
    await resolver.resolve("billing", ["api-key"])
    assert len(counting.reads) == 3


async def test_a_burst_of_attempts_of_one_team_that_miss_the_cache_makes_one_read(store: SqlStore) -> None:
    await put(store, "billing", "api-key", TOKEN)
    counting = CountingStore(store)
    resolver = SecretResolver(counting, KEYS, clock=ManualClock(START))
    burst = [resolver.resolve("billing", ["api-key"], ["webhook-signing"]) for _ in range(20)]
    burst.append(resolver.resolve("payments", [], ["webhook-signing"]))
    results = await asyncio.gather(*burst)
    assert all(result.values == {"api-key": TOKEN} for result in results[:20])
    assert sorted(team for team, _ in counting.reads) == ["billing", "payments"]
    assert resolver._reading == {}  # no lock kept once the burst is over


async def test_the_cache_holds_sealed_rows_only(store: SqlStore) -> None:
    await put(store, "billing", "api-key", TOKEN)
    resolver = SecretResolver(store, KEYS)
    await resolver.resolve("billing", ["api-key"])
    cached = repr(vars(resolver)) + "".join(
        entry.value.decode(errors="replace") for _, entry in resolver._cache.values() if entry is not None
    )
    assert TOKEN not in cached


async def test_a_missing_secret_says_which_team_and_how_to_set_it(store: SqlStore) -> None:
    with pytest.raises(SecretUnavailableError) as raised:
        await SecretResolver(store, KEYS).resolve("billing", ["api-key"])
    assert str(raised.value) == (
        "secret 'api-key' does not exist in team 'billing' (deleted since it was referenced?); "
        "set it with `cronwheel secrets set billing/api-key`"
    )


async def test_another_teams_secret_of_that_name_is_not_resolved(store: SqlStore) -> None:
    await put(store, "payments", "api-key", TOKEN)
    with pytest.raises(SecretUnavailableError, match="does not exist in team 'billing'"):
        await SecretResolver(store, KEYS).resolve("billing", ["api-key"])


async def test_a_worker_without_keys_or_without_the_key_fails_clearly(store: SqlStore) -> None:
    await put(store, "billing", "api-key", TOKEN, Keyring([new_key("k1"), new_key("k2")]))
    with pytest.raises(SecretUnavailableError, match="this worker has no secret keys") as raised:
        await SecretResolver(store, None).resolve("billing", ["api-key"])
    assert "CRONWHEEL_SECRET_KEYS" in str(raised.value)
    with pytest.raises(SecretUnavailableError, match="encrypted with key 'k2', which this process does not"):
        await SecretResolver(store, KEYS).resolve("billing", ["api-key"])
    # the team default signing secret is optional, but one that exists must open
    await put(store, "billing", "webhook-signing", "whsec_x", Keyring([new_key("k1")]))
    with pytest.raises(SecretUnavailableError, match="does not open with key 'k1'"):
        await SecretResolver(store, KEYS).resolve("billing", [], ["webhook-signing"])


async def test_without_a_store_only_optional_names_pass() -> None:
    resolver = SecretResolver(None, None)
    assert (await resolver.resolve("billing", [], ["webhook-signing"])).values == {}
    with pytest.raises(SecretUnavailableError, match="no secret store"):
        await resolver.resolve("billing", ["api-key"])


def test_targets_get_their_values_for_the_attempt_only() -> None:
    resolved = Resolved({"api-key": TOKEN, "db": "pg-pass"})
    http = HttpTarget(
        "https://x",
        headers=(("A", "1"), ("Authorization", SecretRef("api-key"))),
        signing_secret=SecretRef("s"),
    )
    assert resolved.target(http) == HttpTarget("https://x", headers=(("A", "1"), ("Authorization", TOKEN)))
    command = CommandTarget(("/bin/true",), env=(("DB", SecretRef("db")), ("X", "y")))
    assert resolved.target(command).env == (("DB", "pg-pass"), ("X", "y"))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"got {TOKEN} twice: {TOKEN}.", "got [secret:api-key] twice: [secret:api-key]."),
        (f"...the response ended in {TOKEN[:7]}", "...the response ended in [secret:api-key]"),
        (f"{TOKEN[-6:]} and the tail of the output", "[secret:api-key] and the tail of the output"),
        (f"cut {TOKEN[:3]}", f"cut {TOKEN[:3]}"),  # fragments under 4 characters are left
        (
            "the long one hunter2-and-more, the short hunter2",
            "the long one [secret:long], the short [secret:short]",
        ),
        ("nothing here", "nothing here"),
    ],
    ids=["whole", "cut-at-the-end", "cut-at-the-start", "short-fragment", "longest-first", "none"],
)
def test_redaction(text: str, expected: str) -> None:
    resolved = Resolved({"api-key": TOKEN, "short": "hunter2", "long": "hunter2-and-more"})
    assert resolved.redact(text) == expected


def test_a_result_keeps_neither_in_its_output_nor_in_its_error() -> None:
    resolved = Resolved({"api-key": TOKEN})
    result = AttemptResult(Outcome.FAILURE, status_code=401, error=f"bad {TOKEN}", output=f"echo: {TOKEN}")
    redacted = resolved.redacted(result)
    assert (redacted.error, redacted.output) == ("bad [secret:api-key]", "echo: [secret:api-key]")
    assert redacted.status_code == 401


def test_a_result_keeps_none_in_its_longer_output_either() -> None:
    resolved = Resolved({"api-key": TOKEN})
    result = AttemptResult(Outcome.SUCCESS, output="short", output_tail=f"{'x' * 2000} {TOKEN} end")
    assert resolved.redacted(result).output_tail == f"{'x' * 2000} [secret:api-key] end"
