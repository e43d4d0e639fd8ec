"""How the KIP-848 group records (epochlog.groups.consumer.records) are kept in ``__consumer_offsets``: in Kafka's
own record types and binary layout, so that Kafka's tooling reads them and the format is Kafka's.

A key is the record type (int16) followed by the key struct (not flexible: int16-length strings); a value is
the value's version (int16, 0 for all of these) followed by the value struct (flexible: compact strings and
arrays, tagged fields after each struct); a tombstone is a key with no value. The schemas below are Kafka's
(group-coordinator's ``ConsumerGroup*Key/Value.json``), field for field in wire order:

    3 ConsumerGroupMetadata                  key: GroupId
    4 ConsumerGroupPartitionMetadata         key: GroupId
    5 ConsumerGroupMemberMetadata            key: GroupId, MemberId
    6 ConsumerGroupTargetAssignmentMetadata  key: GroupId
    7 ConsumerGroupTargetAssignmentMember    key: GroupId, MemberId
    8 ConsumerGroupCurrentMemberAssignment   key: GroupId, MemberId

Kafka's records name a topic by its id where ours name it by name: the writer maps names to the ids the
cluster's metadata has now, the reader maps ids back. A partition of a topic without an id (gone before its
record is written, or deleted before the log is read) cannot be named and is left out; the group's next
epoch, which the topic's going starts anyway, assigns without it. PartitionMetadata carries the name too,
so it is read by name. What our core does not track is written as Kafka's default: no racks per partition,
no ClassicMemberMetadata (tag 0, null: our members speak the consumer protocol only).

A ConsumerGroupMetadata tombstone deletes the whole group, as Kafka's loader takes it: every record of the
group before it is void. The group's other records are tombstoned before it, as Kafka does, so compaction
leaves nothing of a deleted group.

Logs written before this format (key versions 1003-1008, JSON values: consumer_records_json.py) still load.
"""

from __future__ import annotations

import logging
import struct
import uuid
from collections.abc import Callable, Collection, Mapping
from typing import Any

from epochlog.groups.consumer.model import STABLE, UNRELEASED_PARTITIONS, UNREVOKED_PARTITIONS
from epochlog.groups.consumer.records import (
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
)
from epochlog.protocol import struct_schema as s
from epochlog.server.groups import consumer_records_json as old
from epochlog.server.groups.consumer_records_json import GroupDeleted as GroupDeleted

log = logging.getLogger("epochlog.groups")

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_ASSIGNMENT = 8
KEY_VERSIONS = frozenset(range(GROUP_METADATA, CURRENT_ASSIGNMENT + 1)) | old.KEY_VERSIONS
VALUE_VERSION = 0
NO_TOPIC_ID = uuid.UUID(int=0)

# Kafka's MemberState byte values.
MEMBER_STATES = {STABLE: 0, UNREVOKED_PARTITIONS: 1, UNRELEASED_PARTITIONS: 2}
_STATES_BY_VALUE = {v: k for k, v in MEMBER_STATES.items()}

GROUP_KEY = s.Struct((("GroupId", s.STRING),))
MEMBER_KEY = s.Struct((("GroupId", s.STRING), ("MemberId", s.STRING)))
TOPIC_PARTITIONS = s.Struct((("TopicId", s.UUID), ("Partitions", s.Array(s.INT32))))
VALUES: dict[int, s.Struct] = {
    GROUP_METADATA: s.Struct((("Epoch", s.INT32),)),
    PARTITION_METADATA: s.Struct(
        (
            (
                "Topics",
                s.Array(
                    s.Struct(
                        (
                            ("TopicId", s.UUID),
                            ("TopicName", s.STRING),
                            ("NumPartitions", s.INT32),
                            (
                                "PartitionMetadata",
                                s.Array(s.Struct((("Partition", s.INT32), ("Racks", s.Array(s.STRING))))),
                            ),
                        )
                    )
                ),
            ),
        )
    ),
    MEMBER_METADATA: s.Struct(
        (
            ("InstanceId", s.NULLABLE_STRING),
            ("RackId", s.NULLABLE_STRING),
            ("ClientId", s.STRING),
            ("ClientHost", s.STRING),
            ("SubscribedTopicNames", s.Array(s.STRING)),
            ("SubscribedTopicRegex", s.NULLABLE_STRING),
            ("RebalanceTimeoutMs", s.INT32),
            ("ServerAssignor", s.NULLABLE_STRING),
            # ClassicMemberMetadata: tag 0, null unless the member speaks the classic protocol (ours never do)
        )
    ),
    TARGET_METADATA: s.Struct((("AssignmentEpoch", s.INT32),)),
    TARGET_MEMBER: s.Struct((("TopicPartitions", s.Array(TOPIC_PARTITIONS)),)),
    CURRENT_ASSIGNMENT: s.Struct(
        (
            ("MemberEpoch", s.INT32),
            ("PreviousMemberEpoch", s.INT32),
            ("State", s.INT8),
            ("AssignedPartitions", s.Array(TOPIC_PARTITIONS)),
            ("PartitionsPendingRevocation", s.Array(TOPIC_PARTITIONS)),
        )
    ),
}
_MEMBER_KEYED = frozenset({MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT})


def _key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    if member_id is None:
        return struct.pack(">h", record_type) + s.encode(GROUP_KEY, {"GroupId": group_id}, flexible=False)
    fields = {"GroupId": group_id, "MemberId": member_id}
    return struct.pack(">h", record_type) + s.encode(MEMBER_KEY, fields, flexible=False)


def _value(record_type: int, fields: dict[str, Any]) -> bytes:
    return struct.pack(">h", VALUE_VERSION) + s.encode(VALUES[record_type], fields, flexible=True)


def group_tombstones(group_id: str) -> list[tuple[bytes, bytes | None]]:
    """What deletes a group with no members left: its group-level records' tombstones, ConsumerGroupMetadata's
    last (Kafka's order)."""
    return [(_key(t, group_id), None) for t in (TARGET_METADATA, PARTITION_METADATA, GROUP_METADATA)]


def _by_topic_id(
    partitions: Collection[tuple[str, int]], topic_ids: Mapping[str, uuid.UUID], what: str
) -> list[dict[str, Any]]:
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    out = []
    for t, ps in sorted(by_topic.items()):
        tid = topic_ids.get(t)
        if tid is None:
            log.warning("%s: topic %s has no id any more; its partitions %s are left out", what, t, sorted(ps))
            continue
        out.append({"TopicId": tid, "Partitions": sorted(ps)})
    return out


def encode(r: Record, topic_ids: Mapping[str, uuid.UUID]) -> tuple[bytes, bytes | None] | None:
    """The (key, value) to write for ``r``, naming topics by the ids in ``topic_ids``; None for what is not kept
    here (offsets go as OffsetCommit records)."""
    g = r.group_id
    if isinstance(r, ConsumerGroupMetadata):
        return _key(GROUP_METADATA, g), _value(GROUP_METADATA, {"Epoch": r.epoch})
    if isinstance(r, ConsumerGroupPartitionMetadata):
        topics = [
            {"TopicId": topic_ids.get(t, NO_TOPIC_ID), "TopicName": t, "NumPartitions": n, "PartitionMetadata": []}
            for t, n in r.topics
        ]
        return _key(PARTITION_METADATA, g), _value(PARTITION_METADATA, {"Topics": topics})
    if isinstance(r, ConsumerGroupMemberMetadata):
        fields: dict[str, Any] = {
            "InstanceId": r.instance_id,
            "RackId": r.rack_id,
            "ClientId": r.client_id,
            "ClientHost": r.client_host,
            "SubscribedTopicNames": list(r.subscribed_topic_names),
            "SubscribedTopicRegex": r.subscribed_topic_regex,
            "RebalanceTimeoutMs": r.rebalance_timeout_ms,
            "ServerAssignor": r.server_assignor,
        }
        return _key(MEMBER_METADATA, g, r.member_id), _value(MEMBER_METADATA, fields)
    if isinstance(r, ConsumerGroupTargetAssignmentMetadata):
        return _key(TARGET_METADATA, g), _value(TARGET_METADATA, {"AssignmentEpoch": r.assignment_epoch})
    if isinstance(r, ConsumerGroupTargetAssignmentMember):
        what = f"consumer group {g} target of {r.member_id}"
        value = {"TopicPartitions": _by_topic_id(r.partitions, topic_ids, what)}
        return _key(TARGET_MEMBER, g, r.member_id), _value(TARGET_MEMBER, value)
    if isinstance(r, ConsumerGroupCurrentMemberAssignment):
        what = f"consumer group {g} assignment of {r.member_id}"
        fields = {
            "MemberEpoch": r.member_epoch,
            "PreviousMemberEpoch": r.previous_member_epoch,
            "State": MEMBER_STATES[r.state],
            "AssignedPartitions": _by_topic_id(r.assigned, topic_ids, what),
            "PartitionsPendingRevocation": _by_topic_id(r.pending_revocation, topic_ids, what),
        }
        return _key(CURRENT_ASSIGNMENT, g, r.member_id), _value(CURRENT_ASSIGNMENT, fields)
    if isinstance(r, ConsumerGroupMemberMetadataTombstone):
        return _key(MEMBER_METADATA, g, r.member_id), None
    if isinstance(r, ConsumerGroupTargetAssignmentMemberTombstone):
        return _key(TARGET_MEMBER, g, r.member_id), None
    if isinstance(r, ConsumerGroupCurrentMemberAssignmentTombstone):
        return _key(CURRENT_ASSIGNMENT, g, r.member_id), None
    return None


def is_consumer_key(key: bytes) -> bool:
    """A KIP-848 group record's key, in Kafka's format or our old one."""
    return len(key) >= 2 and struct.unpack_from(">h", key, 0)[0] in KEY_VERSIONS


def _partitions(topics: list[dict[str, Any]], topic_names: Mapping[uuid.UUID, str]) -> frozenset[tuple[str, int]]:
    """By topic name; the partitions of a topic id the cluster no longer has are dropped (the topic is gone)."""
    return frozenset(
        (name, p) for t in topics if (name := topic_names.get(t["TopicId"])) is not None for p in t["Partitions"]
    )


def _state(value: int) -> str:
    state = _STATES_BY_VALUE.get(value)
    if state is None:
        raise ValueError(f"unknown member state {value}")
    return state


_Decoder = Callable[[str, str, dict[str, Any], Mapping[uuid.UUID, str]], Record]
_DECODE: dict[int, _Decoder] = {
    GROUP_METADATA: lambda g, _m, f, _n: ConsumerGroupMetadata(g, f["Epoch"]),
    PARTITION_METADATA: lambda g, _m, f, _n: ConsumerGroupPartitionMetadata(
        g, tuple((t["TopicName"], t["NumPartitions"]) for t in f["Topics"])
    ),
    MEMBER_METADATA: lambda g, m, f, _n: ConsumerGroupMemberMetadata(
        g,
        m,
        f["InstanceId"],
        f["RackId"],
        f["ClientId"],
        f["ClientHost"],
        tuple(f["SubscribedTopicNames"]),
        f["SubscribedTopicRegex"],
        f["ServerAssignor"],
        f["RebalanceTimeoutMs"],
    ),
    TARGET_METADATA: lambda g, _m, f, _n: ConsumerGroupTargetAssignmentMetadata(g, f["AssignmentEpoch"]),
    TARGET_MEMBER: lambda g, m, f, n: ConsumerGroupTargetAssignmentMember(g, m, _partitions(f["TopicPartitions"], n)),
    CURRENT_ASSIGNMENT: lambda g, m, f, n: ConsumerGroupCurrentMemberAssignment(
        g,
        m,
        f["MemberEpoch"],
        f["PreviousMemberEpoch"],
        _state(f["State"]),
        _partitions(f["AssignedPartitions"], n),
        _partitions(f["PartitionsPendingRevocation"], n),
    ),
}
_TOMBSTONES: dict[int, Callable[[str, str], Record]] = {
    MEMBER_METADATA: ConsumerGroupMemberMetadataTombstone,
    TARGET_MEMBER: ConsumerGroupTargetAssignmentMemberTombstone,
    CURRENT_ASSIGNMENT: ConsumerGroupCurrentMemberAssignmentTombstone,
}


def decode(key: bytes, value: bytes | None, topic_names: Mapping[uuid.UUID, str]) -> Record | GroupDeleted | None:
    """The record a (key, value) holds, topics named by ``topic_names`` (id to name); None for another kind of
    record or a tombstone that deletes nothing on its own (partition and target metadata go with the group).
    Raises ValueError on bytes that do not parse."""
    if len(key) < 2:
        return None
    (record_type,) = struct.unpack_from(">h", key, 0)
    if record_type in old.KEY_VERSIONS:
        return old.decode(key, value)
    if record_type not in _DECODE:
        return None
    k, _ = s.decode(MEMBER_KEY if record_type in _MEMBER_KEYED else GROUP_KEY, key, 2, flexible=False)
    g, m = k["GroupId"], k.get("MemberId", "")
    if value is None:
        if record_type == GROUP_METADATA:
            return GroupDeleted(g)
        tomb = _TOMBSTONES.get(record_type)
        return tomb(g, m) if tomb is not None else None
    if len(value) < 2:
        raise ValueError(f"consumer group record type {record_type}: value too short")
    (version,) = struct.unpack_from(">h", value, 0)
    if version != VALUE_VERSION:
        raise ValueError(f"consumer group record type {record_type}: unknown value version {version}")
    fields, _ = s.decode(VALUES[record_type], value, 2, flexible=True)
    return _DECODE[record_type](g, m, fields, topic_names)
