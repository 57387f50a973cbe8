"""cronwheel.receiver: signatures the specification's reference library (standardwebhooks) makes
are accepted and what it refuses is refused, timestamps outside the tolerance are refused, and
each execution id is taken once from either store."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from cronwheel.errors import CronwheelError
from cronwheel.receiver import (
    Deduplicator,
    Delivery,
    Duplicate,
    InvalidSecret,
    InvalidSignature,
    MemoryDeduplicator,
    Receiver,
    SqliteDeduplicator,
    StaleTimestamp,
    asgi_headers,
    verify,
    wsgi_headers,
)
from cronwheel.secrets.signing import new_signing_secret, signature_header, signing_keys

NOW = 1_780_000_000  # a fixed "now" for the tests that do not involve the reference library
BODY = b'{"n":1,"w":"w\xc3\xb6rld"}'
ID = "0193f2a4-run-0001"


def signed(secret: str, *, webhook_id: str = ID, timestamp: int = NOW, body: bytes = BODY) -> dict[str, str]:
    """Headers as the reference library signs them."""
    at = datetime.fromtimestamp(timestamp, UTC)
    signature = Webhook(secret).sign(webhook_id, at, body.decode())
    return {"webhook-id": webhook_id, "webhook-timestamp": str(timestamp), "webhook-signature": signature}


def test_a_signature_of_the_reference_library_verifies() -> None:
    secret = new_signing_secret()
    assert verify(secret, signed(secret), BODY, now=NOW) == Delivery(ID, NOW, BODY)


def test_what_cronwheel_signs_verifies_with_ours_and_with_the_reference() -> None:
    secret = new_signing_secret()
    now = int(time.time())
    headers = {
        "Webhook-Id": ID,  # any case
        "Webhook-Timestamp": str(now),
        "Webhook-Signature": signature_header(signing_keys(secret, "s"), ID, now, BODY),
    }
    assert verify(secret, headers, BODY).id == ID
    Webhook(secret).verify(BODY, headers)


@settings(max_examples=200, deadline=None)
@given(
    body=st.text(max_size=200).map(str.encode),
    webhook_id=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=40),
    tamper=st.sampled_from(["none", "body", "id", "timestamp", "signature", "other key", "version"]),
)
def test_ours_accepts_exactly_what_the_reference_accepts(body: bytes, webhook_id: str, tamper: str) -> None:
    secret, other = new_signing_secret(), new_signing_secret()
    now = int(time.time())
    headers = signed(
        other if tamper == "other key" else secret, webhook_id=webhook_id, timestamp=now, body=body
    )
    if tamper == "body":
        body += b" "
    elif tamper == "id":
        headers["webhook-id"] += "x"
    elif tamper == "timestamp":
        headers["webhook-timestamp"] = str(now + 1)
    elif tamper == "signature":
        raw = bytearray(base64.b64decode(headers["webhook-signature"][3:]))
        raw[0] ^= 1
        headers["webhook-signature"] = "v1," + base64.b64encode(bytes(raw)).decode()
    elif tamper == "version":
        headers["webhook-signature"] = "v2" + headers["webhook-signature"][2:]
    try:
        Webhook(secret).verify(body, headers, json_parse=False)
        reference = True
    except WebhookVerificationError:
        reference = False
    try:
        verify(secret, headers, body, now=now)
        ours = True
    except InvalidSignature:
        ours = False
    assert ours == reference == (tamper == "none")


def test_during_a_rotation_either_secret_verifies_and_either_signature_counts() -> None:
    new, old = new_signing_secret(), new_signing_secret()
    both = signature_header(signing_keys(f"{new} {old}", "s"), ID, NOW, BODY)
    headers = {"webhook-id": ID, "webhook-timestamp": str(NOW), "webhook-signature": both}
    for secrets in (new, old, [new, old], f"{new} {old}", [old]):
        assert verify(secrets, headers, BODY, now=NOW).id == ID
    old_only = signed(old)
    assert verify([new, old], old_only, BODY, now=NOW).id == ID
    with pytest.raises(InvalidSignature, match="no signature made with a known secret"):
        verify(new, old_only, BODY, now=NOW)
    raw_key = base64.b64decode(new.removeprefix("whsec_"))
    assert verify(raw_key, headers, BODY, now=NOW).id == ID


@pytest.mark.parametrize(
    ("offset", "refused"), [(-300, False), (300, False), (-301, True), (301, True), (-86_400, True)]
)
def test_timestamps_beyond_the_tolerance_either_way_are_stale(offset: int, refused: bool) -> None:
    secret = new_signing_secret()
    headers = signed(secret, timestamp=NOW + offset)
    if not refused:
        assert verify(secret, headers, BODY, now=NOW).timestamp == NOW + offset
        return
    with pytest.raises(StaleTimestamp, match="in the future" if offset > 0 else "ago") as stale:
        verify(secret, headers, BODY, now=NOW)
    assert (stale.value.timestamp, stale.value.now) == (NOW + offset, NOW)
    assert verify(secret, headers, BODY, now=NOW, tolerance=100_000).id == ID


def test_an_unsigned_or_forged_message_is_invalid_whatever_its_timestamp() -> None:
    secret = new_signing_secret()
    forged = {**signed(new_signing_secret(), timestamp=NOW - 10_000)}
    with pytest.raises(InvalidSignature):  # not StaleTimestamp: the signature is checked first
        verify(secret, forged, BODY, now=NOW)
    good = signed(secret)
    for name in ("webhook-id", "webhook-timestamp", "webhook-signature"):
        missing = {key: value for key, value in good.items() if key != name}
        with pytest.raises(InvalidSignature, match=f"no {name} header"):
            verify(secret, missing, BODY, now=NOW)
    for stamp in ("1.5e9", "-1", "", "١٧٨٠٠٠٠٠٠٠"):
        with pytest.raises(InvalidSignature):
            verify(secret, {**good, "webhook-timestamp": stamp}, BODY, now=NOW)
    for header in ("v1,", "v1,not base64!", "garbage", "v1," + "A" * 10_000):
        with pytest.raises(InvalidSignature):
            verify(secret, {**good, "webhook-signature": header}, BODY, now=NOW)


def test_secrets_that_are_not_whsec_are_refused_without_being_quoted() -> None:
    bad: str | list[str]
    for bad in ("hunter2", "whsec_***", "", []):
        with pytest.raises(InvalidSecret) as refused:
            Receiver(bad)
        assert "hunter2" not in str(refused.value)
        assert isinstance(refused.value, CronwheelError)


# -- de-duplication ------------------------------------------------------------------------------


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Deduplicator]:
    if request.param == "memory":
        yield MemoryDeduplicator(ttl=3600)
        return
    sqlite = SqliteDeduplicator(tmp_path / "seen.db", ttl=3600, purge_every=2)
    yield sqlite
    sqlite.close()


def test_an_id_is_claimed_once_until_it_expires_or_is_released(store: Deduplicator) -> None:
    assert store.claim("a", NOW)
    assert not store.claim("a", NOW + 3599)
    assert store.claim("b", NOW + 10)
    assert store.claim("a", NOW + 3600)  # expired: taken again
    store.release("b")
    assert store.claim("b", NOW + 3601)


def test_the_receiver_refuses_a_second_delivery_of_an_execution(store: Deduplicator) -> None:
    secret = new_signing_secret()
    clock = [float(NOW)]
    receiver = Receiver(secret, store, clock=lambda: clock[0])
    assert receiver.verify(signed(secret), BODY).id == ID
    clock[0] += 30
    retry = signed(secret, timestamp=NOW + 30)  # a retry: same id, new timestamp and signature
    with pytest.raises(Duplicate, match=f"execution {ID} was received already") as duplicate:
        receiver.verify(retry, BODY)
    assert duplicate.value.webhook_id == ID
    with pytest.raises(InvalidSignature):  # a forgery claims nothing
        receiver.verify(
            {**signed(secret, webhook_id="other"), "webhook-signature": retry["webhook-signature"]}, BODY
        )
    assert receiver.verify(signed(secret, webhook_id="other", timestamp=NOW + 30), BODY).id == "other"


def test_work_that_fails_releases_the_id_for_the_retry(store: Deduplicator) -> None:
    secret = new_signing_secret()
    receiver = Receiver(secret, store, clock=lambda: float(NOW))
    with pytest.raises(RuntimeError), receiver.receive(signed(secret), BODY):
        raise RuntimeError("the work failed")
    with receiver.receive(signed(secret), BODY) as delivery:
        assert delivery.id == ID
    with pytest.raises(Duplicate), receiver.receive(signed(secret), BODY):
        pass


def test_the_memory_store_is_bounded_oldest_first() -> None:
    store = MemoryDeduplicator(ttl=3600, max_entries=3)
    for index in range(5):
        assert store.claim(f"id-{index}", NOW + index)
    assert len(store) == 3
    assert store.claim("id-0", NOW + 5)  # forgotten to make room
    assert not store.claim("id-4", NOW + 5)


def test_the_sqlite_store_is_shared_by_two_processes_and_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "seen.db"
    one, two = SqliteDeduplicator(path), SqliteDeduplicator(path)
    assert one.claim("a", NOW)
    assert not two.claim("a", NOW + 1)
    one.close()
    two.close()
    again = SqliteDeduplicator(path)
    assert not again.claim("a", NOW + 2)
    again.close()


def test_headers_of_wsgi_and_asgi_requests() -> None:
    environ = {"HTTP_WEBHOOK_ID": ID, "CONTENT_LENGTH": "3", "HTTP_WEBHOOK_TIMESTAMP": "1"}
    assert wsgi_headers(environ) == {"webhook-id": ID, "webhook-timestamp": "1"}
    scope = {"headers": [(b"Webhook-Id", ID.encode()), (b"webhook-signature", b"v1,x")]}
    assert asgi_headers(scope) == {"webhook-id": ID, "webhook-signature": "v1,x"}


def test_the_receiver_imports_none_of_the_servers_dependencies() -> None:
    code = (
        "import sys, cronwheel.receiver; "
        "heavy = sorted(m for m in ('fastapi', 'sqlalchemy', 'pydantic', 'aiohttp', 'httpx', 'redis', "
        "'asyncpg', 'cryptography', 'starlette') if m in sys.modules); print(heavy)"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ
    )
    assert found.stdout.strip() == "[]"
