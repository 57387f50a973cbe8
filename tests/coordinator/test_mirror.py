"""The local copy of the coordinator's keys (``cronwheel.coordinator.mirror``): what the
reconcile plan and the sit-out rule read from it."""

from __future__ import annotations

from datetime import UTC, datetime

from cronwheel.coordinator.etcd_api import Event, KeyValue
from cronwheel.coordinator.mirror import MemberRecord, Mirror, encode_member, member_record
from cronwheel.coordinator.plan import ShardKey, encode_assignment

ROOT = "/cw/"
SINCE = datetime(2026, 1, 1, tzinfo=UTC)


def kv(name: str, value: bytes, created: int, modified: int | None = None, lease: int = 0) -> KeyValue:
    return KeyValue(ROOT + name, value, created, modified or created, lease)


def member(node: str, created: int, *roles: str, lease: int = 7) -> KeyValue:
    return kv(f"members/{node}", encode_member(roles, SINCE), created, lease=lease)


def test_the_view_reads_members_leader_watchdog_assignment_and_shard_keys() -> None:
    mirror = Mirror(ROOT)
    mirror.load(
        50,
        [
            member("n1", 3, "scheduler"),
            member("api", 4, "api"),
            kv("leader", b"n1", 5, lease=7),
            kv("watchdog", b"api", 7, lease=8),
            kv("assignment", encode_assignment(("n1", None)), 6, 9),
            kv("shards/1", b"n1", 12, lease=7),
            kv("shards/x", b"garbage", 13),
            kv("unrelated", b"?", 14),
        ],
    )
    view = mirror.view()
    assert view.revision == 50
    assert dict(view.members) == {"n1": ("scheduler",), "api": ("api",)}
    assert (view.leader, view.leader_lease) == ("n1", 7)
    assert (view.watchdog, view.watchdog_lease) == ("api", 8)
    assert (view.assignment, view.assignment_revision) == (("n1", None), 9)
    assert dict(view.shards) == {1: ShardKey("n1", 7, 12)}


def test_events_update_the_copy_and_its_revision_and_forget_asks_for_a_full_read() -> None:
    mirror = Mirror(ROOT)
    mirror.load(10, [member("n1", 3, "scheduler")])
    mirror.apply([Event("PUT", kv("shards/2", b"n1", 11)), Event("DELETE", kv("members/n1", b"", 3, 12))])
    assert set(mirror.kvs) == {ROOT + "shards/2"}
    assert mirror.revision == 12
    mirror.forget()
    assert mirror.revision == 0


def test_schedulers_are_the_other_scheduler_members_with_their_create_revision() -> None:
    mirror = Mirror(ROOT)
    mirror.load(
        60,
        [
            member("me", 2, "scheduler"),
            member("n2", 5, "scheduler", "worker"),
            member("n3", 44, "scheduler"),  # joined again after someone's trouble began
            member("w1", 6, "worker"),
            kv("members/broken", b"not json", 7),
        ],
    )
    assert mirror.schedulers("me") == {"n2": 5, "n3": 44}


def test_member_records_round_trip_and_garbage_reads_as_nothing() -> None:
    assert member_record(encode_member(("scheduler", "api"), SINCE)) == MemberRecord(
        ("scheduler", "api"), SINCE
    )
    url = "http://10.0.0.7:9464/metrics"
    assert member_record(encode_member(("worker",), SINCE, url)) == MemberRecord(("worker",), SINCE, url)
    assert member_record(b"[1, 2]") == MemberRecord()
    assert member_record(b"\xff") == MemberRecord()
