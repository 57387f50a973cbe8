"""Sealing team secrets (cronwheel.secrets.crypto): AES-256-GCM bound to team and name, several
keys with the newest sealing. Every way a sealed value can be wrong is refused, and no error ever
holds a byte of the value."""

from __future__ import annotations

import pytest

from cronwheel.secrets.crypto import (
    FORMAT,
    KEY_BYTES,
    NONCE_BYTES,
    TAG_BYTES,
    Key,
    Keyring,
    KeyringError,
    MissingKeyError,
    Sealed,
    UnsealError,
    associated_data,
    new_key,
    seal,
    unseal,
)

VALUE = "sk_live_51H-billing-api-key-ßecret"
OLD, NEW = new_key("k1"), new_key("k2")
RING = Keyring([OLD, NEW])


def _flip(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :]


def test_a_sealed_value_opens_to_what_went_in_and_holds_none_of_it() -> None:
    sealed = seal(RING, "billing", "api-key", VALUE)
    assert sealed.key_id == "k2"  # the newest key seals
    assert VALUE.encode() not in sealed.value
    assert sealed.value[0] == FORMAT
    assert len(sealed.value) == 1 + NONCE_BYTES + len(VALUE.encode()) + TAG_BYTES
    assert unseal(RING, "billing", "api-key", sealed) == VALUE


def test_every_seal_has_a_fresh_nonce() -> None:
    first, second = (seal(RING, "billing", "api-key", VALUE) for _ in range(2))
    assert first.value[1 : 1 + NONCE_BYTES] != second.value[1 : 1 + NONCE_BYTES]
    assert first.value != second.value


@pytest.mark.parametrize(
    "index",
    [1, NONCE_BYTES, 1 + NONCE_BYTES, -TAG_BYTES - 1, -1],
    ids=["nonce-first", "nonce-last", "ciphertext-first", "ciphertext-last", "tag-last"],
)
def test_a_changed_byte_is_refused(index: int) -> None:
    sealed = seal(RING, "billing", "api-key", VALUE)
    tampered = Sealed(sealed.key_id, _flip(sealed.value, index % len(sealed.value)))
    with pytest.raises(UnsealError, match="does not open with key 'k2'") as raised:
        unseal(RING, "billing", "api-key", tampered)
    assert VALUE not in str(raised.value)


def test_a_value_cut_short_or_of_another_format_is_refused() -> None:
    sealed = seal(RING, "billing", "api-key", VALUE)
    with pytest.raises(UnsealError, match="not a sealed value"):
        unseal(RING, "billing", "api-key", Sealed("k2", sealed.value[: 1 + NONCE_BYTES]))
    with pytest.raises(UnsealError, match="not a sealed value"):
        unseal(RING, "billing", "api-key", Sealed("k2", bytes([FORMAT + 1]) + sealed.value[1:]))


@pytest.mark.parametrize(
    ("team", "name"),
    [("payments", "api-key"), ("billing", "other-key"), ("billingapi", "-key"), ("", "billingapi-key")],
    ids=["other-team", "other-name", "shifted-boundary", "empty-team"],
)
def test_a_value_moved_to_another_row_does_not_open(team: str, name: str) -> None:
    """The team and name are bound as associated data: copying the bytes into another team's
    row, or another name's, does not make them that row's credential."""
    sealed = seal(RING, "billing", "api-key", VALUE)
    with pytest.raises(UnsealError, match="stored value was changed or moved"):
        unseal(RING, team, name, sealed)


def test_associated_data_is_unambiguous() -> None:
    assert associated_data("ab", "c") != associated_data("a", "bc")
    assert associated_data("a", "") != associated_data("", "a")


def test_the_wrong_key_under_the_right_id_is_refused() -> None:
    sealed = seal(RING, "billing", "api-key", VALUE)
    impostor = Keyring([OLD, Key("k2", b"\x00" * KEY_BYTES)])
    with pytest.raises(UnsealError, match="the key is not the one it was encrypted with"):
        unseal(impostor, "billing", "api-key", sealed)


def test_a_missing_key_says_which_and_how_to_give_it() -> None:
    sealed = seal(RING, "billing", "api-key", VALUE)
    with pytest.raises(MissingKeyError) as raised:
        unseal(Keyring([OLD]), "billing", "api-key", sealed)
    text = str(raised.value)
    assert "secret 'api-key' of team 'billing' was encrypted with key 'k2'" in text
    assert "it has k1" in text
    assert "CRONWHEEL_SECRET_KEYS" in text
    assert VALUE not in text


def test_rotation_old_values_open_new_values_use_the_newest_key() -> None:
    before = seal(Keyring([OLD]), "billing", "api-key", "old value")
    assert before.key_id == "k1"
    assert unseal(RING, "billing", "api-key", before) == "old value"  # both keys held
    after = seal(RING, "billing", "api-key", "new value")
    assert after.key_id == "k2"
    with pytest.raises(MissingKeyError):
        unseal(Keyring([OLD]), "billing", "api-key", after)  # a process not given the new key yet


def test_keys_never_show_in_a_repr() -> None:
    assert OLD.material.hex() not in repr(OLD)
    assert repr(RING) == "Keyring(ids=['k1', 'k2'], newest='k2')"
    sealed = seal(RING, "billing", "api-key", VALUE)
    assert sealed.value.hex() not in repr(sealed)


def test_a_keyring_refuses_what_cannot_be_a_keyring() -> None:
    with pytest.raises(KeyringError, match="at least one key"):
        Keyring([])
    with pytest.raises(KeyringError, match="more than once: k1"):
        Keyring([OLD, new_key("k1")])
    with pytest.raises(KeyringError, match="is 16 bytes, not 32"):
        Key("k3", b"\x00" * 16)
    with pytest.raises(KeyringError, match="key id"):
        Key("k 3", b"\x00" * KEY_BYTES)
