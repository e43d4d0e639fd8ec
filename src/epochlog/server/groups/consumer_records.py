"""How the KIP-848 group records (epochlog.groups.consumer.records) are kept in ``__consumer_offsets``: in Kafka's
own record types and binary layout, so that Kafka's tooling reads them and the format is Kafka's.

Keys, values and tombstones are laid out as kafka_records.py says. The schemas below are Kafka's
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

import uuid
from collections.abc import Callable, Mapping
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
from epochlog.server.groups import kafka_records as kr
from epochlog.server.groups.consumer_records_json import GroupDeleted as GroupDeleted

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_ASSIGNMENT = 8
KEY_VERSIONS = frozenset(range(GROUP_METADATA, CURRENT_ASSIGNMENT + 1)) | old.KEY_VERSIONS

# Kafka's MemberState byte values.
MEMBER_STATES = {STABLE: 0, UNREVOKED_PARTITIONS: 1, UNRELEASED_PARTITIONS: 2}
_STATES_BY_VALUE = {v: k for k, v in MEMBER_STATES.items()}

VALUES: dict[int, s.Struct] = {
    GROUP_METADATA: s.Struct((("Epoch", s.INT32),)),
    PARTITION_METADATA: kr.PARTITION_METADATA,
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
    TARGET_MEMBER: s.Struct((("TopicPartitions", s.Array(kr.TOPIC_PARTITIONS)),)),
    CURRENT_ASSIGNMENT: s.Struct(
        (
            ("MemberEpoch", s.INT32),
            ("PreviousMemberEpoch", s.INT32),
            ("State", s.INT8),
            ("AssignedPartitions", s.Array(kr.TOPIC_PARTITIONS)),
            ("PartitionsPendingRevocation", s.Array(kr.TOPIC_PARTITIONS)),
        )
    ),
}
_MEMBER_KEYED = frozenset({MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT})


def _value(record_type: int, fields: dict[str, Any]) -> bytes:
    return kr.value(VALUES[record_type], fields)


def group_tombstones(group_id: str) -> list[tuple[bytes, bytes | None]]:
    """What deletes a group with no members left: its group-level records' tombstones, ConsumerGroupMetadata's
    last (Kafka's order)."""
    return [(kr.key(t, group_id), None) for t in (TARGET_METADATA, PARTITION_METADATA, GROUP_METADATA)]


def encode(r: Record, topic_ids: Mapping[str, uuid.UUID]) -> tuple[bytes, bytes | None] | None:
    """The (key, value) to write for ``r``, naming topics by the ids in ``topic_ids``; None for what is not kept
    here (offsets go as OffsetCommit records)."""
    g = r.group_id
    if isinstance(r, ConsumerGroupMetadata):
        return kr.key(GROUP_METADATA, g), _value(GROUP_METADATA, {"Epoch": r.epoch})
    if isinstance(r, ConsumerGroupPartitionMetadata):
        return kr.key(PARTITION_METADATA, g), _value(PARTITION_METADATA, kr.partition_metadata(r.topics, topic_ids))
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
        return kr.key(MEMBER_METADATA, g, r.member_id), _value(MEMBER_METADATA, fields)
    if isinstance(r, ConsumerGroupTargetAssignmentMetadata):
        return kr.key(TARGET_METADATA, g), _value(TARGET_METADATA, {"AssignmentEpoch": r.assignment_epoch})
    if isinstance(r, ConsumerGroupTargetAssignmentMember):
        what = f"consumer group {g} target of {r.member_id}"
        value = {"TopicPartitions": kr.by_topic_id(r.partitions, topic_ids, what)}
        return kr.key(TARGET_MEMBER, g, r.member_id), _value(TARGET_MEMBER, value)
    if isinstance(r, ConsumerGroupCurrentMemberAssignment):
        what = f"consumer group {g} assignment of {r.member_id}"
        fields = {
            "MemberEpoch": r.member_epoch,
            "PreviousMemberEpoch": r.previous_member_epoch,
            "State": MEMBER_STATES[r.state],
            "AssignedPartitions": kr.by_topic_id(r.assigned, topic_ids, what),
            "PartitionsPendingRevocation": kr.by_topic_id(r.pending_revocation, topic_ids, what),
        }
        return kr.key(CURRENT_ASSIGNMENT, g, r.member_id), _value(CURRENT_ASSIGNMENT, fields)
    if isinstance(r, ConsumerGroupMemberMetadataTombstone):
        return kr.key(MEMBER_METADATA, g, r.member_id), None
    if isinstance(r, ConsumerGroupTargetAssignmentMemberTombstone):
        return kr.key(TARGET_MEMBER, g, r.member_id), None
    if isinstance(r, ConsumerGroupCurrentMemberAssignmentTombstone):
        return kr.key(CURRENT_ASSIGNMENT, g, r.member_id), None
    return None


def is_consumer_key(key: bytes) -> bool:
    """A KIP-848 group record's key, in Kafka's format or our old one."""
    return kr.record_type(key) in KEY_VERSIONS


def _state(value: int) -> str:
    state = _STATES_BY_VALUE.get(value)
    if state is None:
        raise ValueError(f"unknown member state {value}")
    return state


_Decoder = Callable[[str, str, dict[str, Any], Mapping[uuid.UUID, str]], Record]
_DECODE: dict[int, _Decoder] = {
    GROUP_METADATA: lambda g, _m, f, _n: ConsumerGroupMetadata(g, f["Epoch"]),
    PARTITION_METADATA: lambda g, _m, f, _n: ConsumerGroupPartitionMetadata(g, kr.topics_of(f)),
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
    TARGET_MEMBER: lambda g, m, f, n: ConsumerGroupTargetAssignmentMember(
        g, m, kr.by_topic_name(f["TopicPartitions"], n)
    ),
    CURRENT_ASSIGNMENT: lambda g, m, f, n: ConsumerGroupCurrentMemberAssignment(
        g,
        m,
        f["MemberEpoch"],
        f["PreviousMemberEpoch"],
        _state(f["State"]),
        kr.by_topic_name(f["AssignedPartitions"], n),
        kr.by_topic_name(f["PartitionsPendingRevocation"], n),
    ),
}
_TOMBSTONES: dict[int, Callable[[str, str], Record]] = {
    MEMBER_METADATA: ConsumerGroupMemberMetadataTombstone,
    TARGET_MEMBER: ConsumerGroupTargetAssignmentMemberTombstone,
    CURRENT_ASSIGNMENT: ConsumerGroupCurrentMemberAssignmentTombstone,
}


_FAMILY = kr.RecordFamily(
    "consumer group",
    GROUP_METADATA,
    VALUES,
    _DECODE,
    _TOMBSTONES,
    _MEMBER_KEYED,
    GroupDeleted,
    old.KEY_VERSIONS,
    old.decode,
)


def decode(key: bytes, value: bytes | None, topic_names: Mapping[uuid.UUID, str]) -> Record | GroupDeleted | None:
    """The record a (key, value) holds (kafka_records.RecordFamily.decode)."""
    return _FAMILY.decode(key, value, topic_names)
