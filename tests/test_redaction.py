"""What an attempt keeps of the request headers it sent (``cronwheel.redaction.kept_headers``):
credentials by name, values from or holding a secret redacted; repeated names joined; bounded."""

from __future__ import annotations

import pytest

from cronwheel.redaction import (
    HEADER_VALUE_CHARS,
    KEPT_HEADER_CHARS,
    MAX_KEPT_HEADERS,
    REDACTED,
    credential_header,
    kept_headers,
)


@pytest.mark.parametrize(
    "name",
    ["Authorization", "proxy-authorization", "COOKIE", "webhook-signature", "X-Hub-Signature-256",
     "X-Auth-Token", "X-Api-Key", "Api_Key", "X-Session-Id", "X-Client-Secret", "X-Password", "Token"],
)  # fmt: skip
def test_credentials_are_known_by_name(name: str) -> None:
    assert credential_header(name)
    assert kept_headers([(name, "v")]) == ((name, REDACTED),)


@pytest.mark.parametrize(
    "name",
    ["Idempotency-Key", "webhook-id", "webhook-timestamp", "X-Cronwheel-Job-Id", "Content-Type", "Host",
     "User-Agent", "traceparent", "Accept-Encoding"],
)  # fmt: skip
def test_the_webhook_contract_and_plain_headers_are_kept(name: str) -> None:
    assert not credential_header(name)
    assert kept_headers([(name, "v")]) == ((name, "v"),)


def test_values_from_or_holding_a_secret_are_redacted_whatever_the_name() -> None:
    sent = [("X-Tenant", "t-1"), ("X-Note", "see sk_123 here"), ("X-Other", "ok")]
    kept = kept_headers(sent, secret_headers=["x-TENANT"], secret_values=["sk_123", ""])
    assert kept == (("X-Tenant", REDACTED), ("X-Note", REDACTED), ("X-Other", "ok"))


def test_repeated_names_are_joined_under_the_first_spelling_in_order() -> None:
    sent = [("Accept", "a"), ("X-Tag", "1"), ("x-tag", "2"), ("Cookie", "a=1"), ("cookie", "b=2")]
    assert kept_headers(sent) == (("Accept", "a"), ("X-Tag", "1, 2"), ("Cookie", REDACTED))


def test_the_kept_headers_are_bounded() -> None:
    [(_, long)] = kept_headers([("X-Long", "x" * 10_000)])
    assert len(long) == HEADER_VALUE_CHARS
    assert long.endswith("...")
    many = kept_headers([(f"X-H{n}", "v") for n in range(MAX_KEPT_HEADERS + 10)])
    assert len(many) == MAX_KEPT_HEADERS
    wide = kept_headers([(f"X-{n}-" + "n" * 400, "v" * 400) for n in range(40)])
    assert sum(len(name) + len(value) for name, value in wide) <= KEPT_HEADER_CHARS
    assert [name for name, _ in wide] == [f"X-{n}-" + "n" * 400 for n in range(len(wide))]  # the first ones
