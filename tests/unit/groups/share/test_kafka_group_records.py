"""The share group records in Kafka's ShareGroup* record types and binary layout (server/groups/share_records.py):
golden bytes written out by hand from Kafka's ShareGroup*Key/Value schemas, so a field out of order fails; and a
log in the format written before (key versions 1009-1014, JSON values) still loads."""

from __future__ import annotations

import uuid

import pytest

from epochlog.groups.share.group_records import (
    GroupRecord,
    ShareGroupCurrentMemberAssignment,
    ShareGroupCurrentMemberAssignmentTombstone,
    ShareGroupMemberMetadata,
    ShareGroupMemberMetadataTombstone,
    ShareGroupMetadata,
    ShareGroupPartitionMetadata,
    ShareGroupTargetAssignmentMember,
    ShareGroupTargetAssignmentMemberTombstone,
    ShareGroupTargetAssignmentMetadata,
    replay,
)
from epochlog.server.groups import consumer_records as crec
from epochlog.server.groups import share_records as srec

T, U = uuid.UUID(int=1), uuid.UUID(int=2)
IDS = {"t": T, "u": U}
NAMES = {T: "t", U: "u"}
T_ID, U_ID = b"\x00" * 15 + b"\x01", b"\x00" * 15 + b"\x02"
G = b"\x00\x01g"  # GroupId, int16 length
GA = b"\x00\x01g\x00\x01a"  # GroupId, MemberId
V0 = b"\x00\x00"


def _i32(n: int) -> bytes:
    return n.to_bytes(4, "big", signed=True)


GOLDEN: list[tuple[GroupRecord, bytes, bytes | None]] = [
    (
        ShareGroupPartitionMetadata("g", (("t", 4),)),
        b"\x00\x09" + G,
        V0 + b"\x02" + T_ID + b"\x02t" + _i32(4) + b"\x01" + b"\x00" + b"\x00",
    ),
    (
        ShareGroupMemberMetadata("g", "a", "r1", "c", "/h", ("t", "u")),
        b"\x00\x0a" + GA,
        # RackId, ClientId, ClientHost, SubscribedTopicNames, tags
        V0 + b"\x03r1" + b"\x02c" + b"\x03/h" + b"\x03\x02t\x02u" + b"\x00",
    ),
    (ShareGroupMetadata("g", 5), b"\x00\x0b" + G, V0 + _i32(5) + b"\x00"),
    (ShareGroupTargetAssignmentMetadata("g", 7), b"\x00\x0c" + G, V0 + _i32(7) + b"\x00"),
    (
        ShareGroupTargetAssignmentMember("g", "a", frozenset({("u", 1), ("t", 0)})),
        b"\x00\x0d" + GA,
        V0 + b"\x03" + T_ID + b"\x02" + _i32(0) + b"\x00" + U_ID + b"\x02" + _i32(1) + b"\x00" + b"\x00",
    ),
    (
        ShareGroupCurrentMemberAssignment("g", "a", 7, 6, frozenset({("t", 0)})),
        b"\x00\x0e" + GA,
        # MemberEpoch, PreviousMemberEpoch, State (STABLE = 0), AssignedPartitions, tags
        V0 + _i32(7) + _i32(6) + b"\x00" + b"\x02" + T_ID + b"\x02" + _i32(0) + b"\x00" + b"\x00",
    ),
    (ShareGroupMemberMetadataTombstone("g", "a"), b"\x00\x0a" + GA, None),
    (ShareGroupTargetAssignmentMemberTombstone("g", "a"), b"\x00\x0d" + GA, None),
    (ShareGroupCurrentMemberAssignmentTombstone("g", "a"), b"\x00\x0e" + GA, None),
]


@pytest.mark.parametrize(("record", "key", "value"), GOLDEN, ids=lambda x: type(x).__name__)
def test_kafka_layout(record: GroupRecord, key: bytes, value: bytes | None) -> None:
    assert srec.encode(record, IDS) == (key, value)
    assert srec.decode(key, value, NAMES) == record
    assert srec.is_share_key(key) and not crec.is_consumer_key(key)


def test_group_tombstones_in_kafkas_order() -> None:
    tombstones = srec.group_tombstones("g")
    assert [k for k, _ in tombstones] == [b"\x00\x0c" + G, b"\x00\x09" + G, b"\x00\x0b" + G]
    assert [srec.decode(k, v, NAMES) for k, v in tombstones] == [None, None, srec.ShareGroupDeleted("g")]


def _old(version: int, member: str | None, fields: str | None) -> tuple[bytes, bytes | None]:
    key = version.to_bytes(2, "big") + G + (b"\x00\x01" + member.encode() if member else b"")
    return key, None if fields is None else V0 + fields.encode()


def test_an_old_format_log_still_loads() -> None:
    log = [
        _old(1011, None, '{"epoch":3}'),
        _old(1009, None, '{"topics":[["t",2]]}'),
        _old(1010, "a", '{"client_host":"/h","client_id":"c","rack_id":null,"topics":["t"]}'),
        _old(1012, None, '{"epoch":3}'),
        _old(1013, "a", '{"partitions":[["t",0],["t",1]]}'),
        _old(1014, "a", '{"assigned":[["t",0],["t",1]],"epoch":3,"previous_epoch":2}'),
    ]
    assert all(srec.is_share_key(k) for k, _ in log)
    records = [srec.decode(k, v, {}) for k, v in log]
    g = replay("g", records, 0, 45_000)  # type: ignore[arg-type]
    assert (g.group_epoch, g.assignment_epoch, g.subscription_metadata) == (3, 3, {"t": 2})
    assert g.target == {"a": frozenset({("t", 0), ("t", 1)})}
    assert g.members["a"].assigned == frozenset({("t", 0), ("t", 1)}) and g.members["a"].member_epoch == 3
    assert srec.decode(*_old(1011, None, None), {}) == srec.ShareGroupDeleted("g")
