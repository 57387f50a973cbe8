"""Rows and cursors: the pure half of the store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from cronwheel.errors import InvalidInputError
from cronwheel.model import CommandTarget, HttpTarget, MqttTarget, NatsTarget, PythonTarget, SecretRef, Target
from cronwheel.store import codec
from cronwheel.store.schema import EPOCH, from_micros, to_micros
from cronwheel.targets import kinds


@pytest.mark.parametrize(
    ("instant", "micros"),
    [
        (EPOCH, 0),
        (datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC), 1),
        (datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC), -1),
        (datetime(1970, 1, 1, 1, 0, 0, 1, tzinfo=timezone(timedelta(hours=1))), 1),
        (datetime(2026, 3, 2, 12, 0, 0, 123456, tzinfo=UTC), 1772452800123456),
    ],
)
def test_instants_are_exact_epoch_microseconds(instant: datetime, micros: int) -> None:
    assert to_micros(instant) == micros
    back = from_micros(micros)
    assert back == instant
    assert back.tzinfo is UTC


def test_naive_instants_are_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        to_micros(datetime(2026, 1, 1))  # noqa: DTZ001
    with pytest.raises(TypeError):
        to_micros("2026-01-01T00:00:00Z")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "target",
    [
        HttpTarget("https://x", "GET", (("A", "1"), ("A", "2")), (200,)),
        CommandTarget(("a", "b"), (("K", "V"),), None),
        PythonTarget("m:f"),
        NatsTarget(
            "nats://n:4222", "a.b", True, (("X", "1"), ("Y", SecretRef("s"))), "u", SecretRef("p"), None
        ),
        NatsTarget("tls://n", "a", token=SecretRef("t")),
        MqttTarget("mqtts://m:8883", "a/b", 2, True, "u", SecretRef("p")),
        MqttTarget("mqtt://m", "a/b"),
    ],
)
def test_targets_round_trip(target: Target) -> None:
    assert kinds.target_from_json(kinds.target_to_json(target)) == target


def test_unknown_target_type_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown target type"):
        kinds.target_from_json({"type": "carrier-pigeon"})
    with pytest.raises(ValueError, match="unknown target type"):
        kinds.target_from_json({"kind": "carrier-pigeon"})


@pytest.mark.parametrize(
    "target",
    [HttpTarget("https://x", "GET", (("A", "1"),), (200,)), CommandTarget(("a",)), PythonTarget("m:f")],
)
def test_targets_are_tagged_type_as_in_the_api(target: Target) -> None:
    """One word for a target's kind everywhere: the API's and jobs.yaml's ``type``."""
    data = kinds.target_to_json(target)
    assert data["type"] == target.type
    assert "kind" not in data


@pytest.mark.parametrize(
    ("row", "target"),
    [
        (
            {"kind": "http", "url": "https://x", "method": "GET", "headers": [["A", "1"]]}
            | {"expected_status": []},
            HttpTarget("https://x", "GET", (("A", "1"),)),
        ),
        (
            {"kind": "command", "argv": ["a", "b"], "env": [], "cwd": "/srv"},
            CommandTarget(("a", "b"), (), "/srv"),
        ),
        ({"kind": "python", "function": "m:f"}, PythonTarget("m:f")),
    ],
)
def test_targets_stored_by_earlier_versions_are_read(row: dict[str, Any], target: Target) -> None:
    """Rows written before the rename tag their target with ``kind``: they still read back."""
    assert kinds.target_from_json(row) == target


def test_cursors_round_trip_and_are_checked() -> None:
    cursor = codec.encode_cursor(-5, "0190-id")
    assert codec.decode_cursor(cursor, (int, str)) == (-5, "0190-id")
    with pytest.raises(InvalidInputError):
        codec.decode_cursor(cursor, (str,))
    with pytest.raises(InvalidInputError):
        codec.decode_cursor(codec.encode_cursor(True, "x"), (int, str))  # bool is not int here


def test_duplicate_labels_get_one_index_row() -> None:
    rows = codec.label_rows("j", (("a", "1"), ("a", "1"), ("a", "2")))
    assert [(row["key"], row["value"]) for row in rows] == [("a", "1"), ("a", "2")]
