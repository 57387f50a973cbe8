"""Where a process gets its keys (cronwheel.secrets.keys): the variable, a file, or the embedded
key file, created 0600 on the first start. Errors name the source and the entry, never a key."""

from __future__ import annotations

import base64
import logging
import os
import re
import stat
from pathlib import Path

import pytest

from cronwheel.secrets.crypto import KEY_BYTES, KeyringError, new_key
from cronwheel.secrets.keys import (
    ENV_KEYS,
    add_key,
    create_key_file,
    generate_key,
    key_line,
    load_keyring,
    parse_keys,
    read_key_file,
)

K1, K2 = new_key("k1"), new_key("k2")
B64_1 = base64.b64encode(K1.material).decode()


def test_a_file_holds_one_key_per_line_with_comments_the_last_seals() -> None:
    text = f"# keys\n{key_line(K1)}  # the first\n\n{key_line(K2)}\n"
    ring = parse_keys(text, "keys.txt")
    assert ring.ids == ("k1", "k2")
    assert ring.newest.id == "k2"
    assert ring.get("k1") == K1


def test_the_variable_may_separate_keys_with_commas_or_spaces() -> None:
    assert parse_keys(f"{key_line(K1)},{key_line(K2)}", ENV_KEYS).ids == ("k1", "k2")
    assert parse_keys(f"{key_line(K1)} {key_line(K2)}", ENV_KEYS).ids == ("k1", "k2")


def test_url_safe_and_unpadded_base64_are_accepted() -> None:
    material = bytes(range(250, 256)) + bytes(26)  # bytes whose base64 holds + and /
    standard = base64.b64encode(material).decode()
    assert "+" in standard or "/" in standard
    urlsafe = base64.urlsafe_b64encode(material).decode().rstrip("=")
    assert parse_keys(f"k9:{urlsafe}", "x").newest.material == material


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "holds no key"),
        ("# only a comment\n", "holds no key"),
        (B64_1, "key 1: expected ID:BASE64"),
        (f"k1:{B64_1}\nk2:not*base64", "key 2 ('k2'): the key is not valid base64"),
        (f"k1:{base64.b64encode(bytes(16)).decode()}", "key 1 ('k1'): the key is 16 bytes, not 32"),
        (f"k1:{B64_1}\nk1:{B64_1}", "given more than once: k1"),
        (f"k 1:{B64_1}", "key 1: expected ID:BASE64"),  # split on the space: "k" then "1:..."
    ],
    ids=["empty", "comment", "no-id", "not-base64", "short", "twice", "space"],
)
def test_malformed_keys_are_refused_without_showing_a_key(text: str, message: str) -> None:
    with pytest.raises(KeyringError, match=re.escape(message)) as raised:
        parse_keys(text, "the-source")
    assert "the-source" in str(raised.value) or "more than once" in str(raised.value)
    assert B64_1 not in str(raised.value)


def test_the_key_file_is_created_owner_only_and_never_twice(tmp_path: Path) -> None:
    path = tmp_path / "cronwheel.db.keys"
    old_umask = os.umask(0)  # even with a permissive umask
    try:
        ring = create_key_file(path)
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_key_file(path).ids == ring.ids
    assert len(ring.newest.material) == KEY_BYTES
    with pytest.raises(KeyringError, match="cannot create"):
        create_key_file(path)  # O_EXCL: a second start never replaces the keys


def test_add_key_appends_a_newest_key_and_keeps_the_others(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    first = create_key_file(path).newest
    added = add_key(path)
    ring = read_key_file(path)
    assert ring.ids == (first.id, added.id)
    assert ring.newest == added
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert add_key(tmp_path / "new-file") == read_key_file(tmp_path / "new-file").newest


def test_generated_ids_are_unique_and_dated() -> None:
    ids = {generate_key().id for _ in range(50)}
    assert len(ids) == 50
    assert all(key_id.startswith("k20") for key_id in ids)


def test_a_key_file_others_can_read_is_used_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "keys"
    path.write_text(key_line(K1) + "\n")
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING, "cronwheel.secrets"):
        assert read_key_file(path).ids == ("k1",)
    assert "can be read by others" in caplog.text
    assert B64_1 not in caplog.text


def test_load_order_variable_then_file_then_the_embedded_file(tmp_path: Path) -> None:
    key_file = tmp_path / "given.keys"
    key_file.write_text(key_line(K2) + "\n")
    embedded = tmp_path / "cronwheel.db.keys"
    from_env = load_keyring(key_line(K1), None, embedded)
    assert (from_env.keyring and from_env.keyring.ids, from_env.origin) == (("k1",), f"from {ENV_KEYS}")
    from_file = load_keyring(None, str(key_file), embedded)
    assert from_file.keyring is not None
    assert from_file.keyring.ids == ("k2",)
    assert not embedded.exists()  # given keys: no file is made
    created = load_keyring(None, None, embedded)
    assert created.created
    assert created.keyring is not None
    assert embedded.exists()
    again = load_keyring(None, None, embedded)
    assert not again.created
    assert again.keyring is not None
    assert again.keyring.ids == created.keyring.ids
    assert load_keyring(None, None, None).keyring is None  # cluster without keys
    with pytest.raises(KeyringError, match="one way"):
        load_keyring(key_line(K1), str(key_file), None)
