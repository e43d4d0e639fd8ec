"""The KIP-848 group records as the broker keeps them in __consumer_offsets (server/groups/consumer_records.py):
in Kafka's record types and binary layout (golden bytes written out by hand from Kafka's ConsumerGroup*Key/Value
schemas, so a field out of order fails), every record and tombstone the core writes reads back as itself, and
a log in the format written before (key versions 1003-1008, JSON values) still loads."""

from __future__ import annotations

import uuid

import pytest

from epochlog.groups.consumer.coordinator import ConsumerGroupCoordinator
from epochlog.groups.consumer.messages import HeartbeatRequest
from epochlog.groups.consumer.model import STABLE, UNREVOKED_PARTITIONS
from epochlog.groups.consumer.records import (
    RECORD_TYPES,
    ConsumerGroupCurrentMemberAssignment,
    ConsumerGroupCurrentMemberAssignmentTombstone,
    ConsumerGroupMemberMetadata,
    ConsumerGroupMemberMetadataTombstone,
    ConsumerGroupMetadata,
    ConsumerGroupPartitionMetadata,
    ConsumerGroupTargetAssignmentMember,
    ConsumerGroupTargetAssignmentMemberTombstone,
    ConsumerGroupTargetAssignmentMetadata,
    Record,
    replay,
)
from epochlog.server.groups import consumer_records as crec
from epochlog.server.groups import records as classic

T, U = uuid.UUID(int=1), uuid.UUID(int=2)
IDS = {"t": T, "u": U}
NAMES = {T: "t", U: "u"}
T_ID, U_ID = b"\x00" * 15 + b"\x01", b"\x00" * 15 + b"\x02"
GROUP_KEY_G = b"\x00\x01g"  # GroupId: int16 length (keys are not flexible)
MEMBER_KEY_GA = b"\x00\x01g\x00\x01a"  # GroupId, MemberId
V0 = b"\x00\x00"  # value version 0


def _i32(n: int) -> bytes:
    return n.to_bytes(4, "big", signed=True)


GOLDEN: list[tuple[Record, bytes, bytes | None]] = [
    (ConsumerGroupMetadata("g", 5), b"\x00\x03" + GROUP_KEY_G, V0 + _i32(5) + b"\x00"),
    (
        ConsumerGroupPartitionMetadata("g", (("t", 4),)),
        b"\x00\x04" + GROUP_KEY_G,
        # Topics: one; TopicId, TopicName (compact), NumPartitions, PartitionMetadata (empty), tags; tags
        V0 + b"\x02" + T_ID + b"\x02t" + _i32(4) + b"\x01" + b"\x00" + b"\x00",
    ),
    (
        ConsumerGroupMemberMetadata("g", "a", None, "r1", "c", "/h", ("t", "u"), None, "uniform", 5000),
        b"\x00\x05" + MEMBER_KEY_GA,
        # InstanceId null, RackId, ClientId, ClientHost, SubscribedTopicNames, SubscribedTopicRegex null,
        # RebalanceTimeoutMs, ServerAssignor, tags (ClassicMemberMetadata absent)
        V0
        + b"\x00"
        + b"\x03r1"
        + b"\x02c"
        + b"\x03/h"
        + b"\x03\x02t\x02u"
        + b"\x00"
        + _i32(5000)
        + b"\x08uniform"
        + b"\x00",
    ),
    (ConsumerGroupTargetAssignmentMetadata("g", 7), b"\x00\x06" + GROUP_KEY_G, V0 + _i32(7) + b"\x00"),
    (
        ConsumerGroupTargetAssignmentMember("g", "a", frozenset({("u", 1), ("t", 2), ("t", 0)})),
        b"\x00\x07" + MEMBER_KEY_GA,
        # TopicPartitions: two (by topic name); each TopicId, Partitions (compact int32 array), tags; tags
        V0 + b"\x03" + T_ID + b"\x03" + _i32(0) + _i32(2) + b"\x00" + U_ID + b"\x02" + _i32(1) + b"\x00" + b"\x00",
    ),
    (
        ConsumerGroupCurrentMemberAssignment(
            "g", "a", 7, 6, UNREVOKED_PARTITIONS, frozenset({("t", 0)}), frozenset({("u", 1)})
        ),
        b"\x00\x08" + MEMBER_KEY_GA,
        # MemberEpoch, PreviousMemberEpoch, State (int8, UNREVOKED_PARTITIONS = 1), AssignedPartitions,
        # PartitionsPendingRevocation, tags
        V0
        + _i32(7)
        + _i32(6)
        + b"\x01"
        + b"\x02"
        + T_ID
        + b"\x02"
        + _i32(0)
        + b"\x00"
        + b"\x02"
        + U_ID
        + b"\x02"
        + _i32(1)
        + b"\x00"
        + b"\x00",
    ),
    (ConsumerGroupMemberMetadataTombstone("g", "a"), b"\x00\x05" + MEMBER_KEY_GA, None),
    (ConsumerGroupTargetAssignmentMemberTombstone("g", "a"), b"\x00\x07" + MEMBER_KEY_GA, None),
    (ConsumerGroupCurrentMemberAssignmentTombstone("g", "a"), b"\x00\x08" + MEMBER_KEY_GA, None),
]


@pytest.mark.parametrize(("record", "key", "value"), GOLDEN, ids=lambda x: type(x).__name__)
def test_kafka_layout(record: Record, key: bytes, value: bytes | None) -> None:
    assert crec.encode(record, IDS) == (key, value)
    assert crec.decode(key, value, NAMES) == record
    assert crec.is_consumer_key(key) and classic.decode_key(key) is None  # the classic loader skips them


def _records() -> list[Record]:
    core = ConsumerGroupCoordinator("g", topics={"t": 4, "u": 2})
    out: list[object] = []
    for i, epoch in (("a", 0), ("b", 0)):
        req = HeartbeatRequest(
            "g", i, epoch, rack_id="r1", rebalance_timeout_ms=5000, subscribed_topic_names=("t", "u"), owned=frozenset()
        )
        out += core.heartbeat(0, req)[1]
    out += core.heartbeat(10, HeartbeatRequest("g", "b", -1))[1]  # leaves: tombstones
    return [e for e in out if isinstance(e, RECORD_TYPES)]  # type: ignore[misc]


def test_every_record_reads_back_as_itself() -> None:
    records = _records()
    kinds = {type(r).__name__ for r in records}
    assert {
        "ConsumerGroupMetadata",
        "ConsumerGroupPartitionMetadata",
        "ConsumerGroupMemberMetadata",
        "ConsumerGroupTargetAssignmentMetadata",
        "ConsumerGroupTargetAssignmentMember",
        "ConsumerGroupCurrentMemberAssignment",
        "ConsumerGroupCurrentMemberAssignmentTombstone",
        "ConsumerGroupTargetAssignmentMemberTombstone",
        "ConsumerGroupMemberMetadataTombstone",
    } <= kinds
    decoded = []
    for r in records:
        kv = crec.encode(r, IDS)
        assert kv is not None
        assert 3 <= int.from_bytes(kv[0][:2], "big") <= 8  # Kafka's record types
        decoded.append(crec.decode(*kv, NAMES))
    assert decoded == records
    g1 = replay("g", records, 0, 45_000)
    g2 = replay("g", decoded, 0, 45_000)  # type: ignore[arg-type]
    assert (g1.group_epoch, g1.target, set(g1.members)) == (g2.group_epoch, g2.target, set(g2.members))
    assert g1.target["a"]  # the member kept has partitions to compare


def test_topics_without_ids_are_left_out() -> None:
    r = ConsumerGroupTargetAssignmentMember("g", "a", frozenset({("t", 0), ("gone", 1)}))
    key, value = crec.encode(r, IDS) or (b"", None)
    assert crec.decode(key, value, NAMES) == ConsumerGroupTargetAssignmentMember("g", "a", frozenset({("t", 0)}))
    # A topic deleted before the log is read: its id names nothing, its partitions drop out.
    assert crec.decode(key, value, {}) == ConsumerGroupTargetAssignmentMember("g", "a", frozenset())
    # PartitionMetadata keeps the name: a topic without an id is written with Kafka's zero id.
    key, value = crec.encode(ConsumerGroupPartitionMetadata("g", (("gone", 2),)), {}) or (b"", None)
    assert value is not None and b"\x00" * 16 + b"\x05gone" in value
    assert crec.decode(key, value, {}) == ConsumerGroupPartitionMetadata("g", (("gone", 2),))


def test_group_tombstones_in_kafkas_order() -> None:
    tombstones = crec.group_tombstones("g")
    assert [k[:2] for k, _ in tombstones] == [b"\x00\x06", b"\x00\x04", b"\x00\x03"]
    assert all(k[2:] == GROUP_KEY_G and v is None for k, v in tombstones)
    assert [crec.decode(k, v, NAMES) for k, v in tombstones] == [None, None, crec.GroupDeleted("g")]


def test_kafka_writers_tagged_classic_metadata_is_skipped() -> None:
    key, value = crec.encode(GOLDEN[2][0], IDS) or (b"", None)
    assert value is not None and value.endswith(b"\x00")
    # ClassicMemberMetadata (tag 0): SessionTimeoutMs 45000, no SupportedProtocols, its own tags
    classic_member = _i32(45000) + b"\x01" + b"\x00"
    tagged = value[:-1] + b"\x01\x00" + bytes([len(classic_member)]) + classic_member
    assert crec.decode(key, tagged, NAMES) == GOLDEN[2][0]


def test_bad_bytes() -> None:
    key = b"\x00\x03" + GROUP_KEY_G
    assert crec.decode(classic.group_key("g"), b"x", NAMES) is None  # not ours
    for bad in (b"\x00\x00\x00\x00", b"\x00\x01" + _i32(5) + b"\x00", b"\x00"):  # short, unknown version, short
        with pytest.raises(ValueError):
            crec.decode(key, bad, NAMES)
    state_99 = GOLDEN[5][2][:10] + b"\x63" + GOLDEN[5][2][11:]  # type: ignore[index]
    with pytest.raises(ValueError):
        crec.decode(GOLDEN[5][1], state_99, NAMES)


def _old(version: int, member: str | None, fields: str | None) -> tuple[bytes, bytes | None]:
    """A record as epochlog wrote it before Kafka's format: int16 key version, int16-length strings, and a
    value of int16 0 and JSON."""
    key = version.to_bytes(2, "big") + GROUP_KEY_G + (b"\x00\x01" + member.encode() if member else b"")
    return key, None if fields is None else V0 + fields.encode()


OLD_LOG = [
    _old(1003, None, '{"epoch":2}'),
    _old(1004, None, '{"topics":[["t",4]]}'),
    _old(
        1005,
        "a",
        '{"assignor":null,"client_host":"/h","client_id":"c","instance_id":"i1","rack_id":null,'
        '"rebalance_timeout_ms":5000,"regex":null,"topics":["t"]}',
    ),
    _old(1006, None, '{"epoch":2}'),
    _old(1007, "a", '{"partitions":[["t",0],["t",1]]}'),
    _old(
        1008,
        "a",
        '{"assigned":[["t",0]],"epoch":2,"pending_revocation":[],"previous_epoch":1,"state":"unreleased_partitions"}',
    ),
    _old(
        1005,
        "b",
        '{"assignor":null,"client_host":"/h","client_id":"c","instance_id":null,"rack_id":null,'
        '"rebalance_timeout_ms":1,"regex":null,"topics":["t"]}',
    ),
    _old(1005, "b", None),
]


def test_an_old_format_log_still_loads() -> None:
    assert all(crec.is_consumer_key(k) for k, _ in OLD_LOG)
    records = [crec.decode(k, v, {}) for k, v in OLD_LOG]
    assert records[5] == ConsumerGroupCurrentMemberAssignment(
        "g", "a", 2, 1, "unreleased_partitions", frozenset({("t", 0)}), frozenset()
    )
    g = replay("g", records, 0, 45_000)  # type: ignore[arg-type]
    assert (g.group_epoch, g.assignment_epoch, g.subscription_metadata) == (2, 2, {"t": 4})
    assert set(g.members) == {"a"} and g.static_members == {"i1": "a"}
    assert g.target == {"a": frozenset({("t", 0), ("t", 1)})}
    assert g.members["a"].assigned == frozenset({("t", 0)}) and g.members["a"].state != STABLE
    assert crec.decode(*_old(1003, None, None), {}) == crec.GroupDeleted("g")
    with pytest.raises(ValueError):
        crec.decode(_old(1003, None, None)[0], b"\x00\x00{not json", {})
