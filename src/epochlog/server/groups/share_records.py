"""How the KIP-932 share group records (epochlog.groups.share.group_records) are kept in ``__consumer_offsets``:
in Kafka's own record types and binary layout, as the KIP-848 records are (consumer_records.py; keys, values
and tombstones as kafka_records.py lays them out, topics by id). The schemas are Kafka's
(group-coordinator's ``ShareGroup*Key/Value.json``), field for field in wire order:

     9 ShareGroupPartitionMetadata          key: GroupId
    10 ShareGroupMemberMetadata             key: GroupId, MemberId
    11 ShareGroupMetadata                   key: GroupId
    12 ShareGroupTargetAssignmentMetadata   key: GroupId
    13 ShareGroupTargetAssignmentMember     key: GroupId, MemberId
    14 ShareGroupCurrentMemberAssignment    key: GroupId, MemberId

A share member has no partitions to revoke, so its State is always Kafka's STABLE (0); it is not read back.
Kafka's ShareGroupStatePartitionMetadata (15) is not written: which share-partitions have state is kept in
``__share_group_state`` (server/share/). A ShareGroupMetadata tombstone deletes the whole group; the target
and partition metadata are tombstoned before it, as Kafka does.

Logs written before this format (key versions 1009-1014, JSON values: share_records_json.py) still load.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

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
)
from epochlog.protocol import struct_schema as s
from epochlog.server.groups import kafka_records as kr
from epochlog.server.groups import share_records_json as old
from epochlog.server.groups.share_records_json import ShareGroupDeleted as ShareGroupDeleted

PARTITION_METADATA = 9
MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_METADATA = 12
TARGET_MEMBER = 13
CURRENT_ASSIGNMENT = 14
KEY_VERSIONS = frozenset(range(PARTITION_METADATA, CURRENT_ASSIGNMENT + 1)) | old.KEY_VERSIONS
STABLE = 0  # Kafka's MemberState.STABLE

VALUES: dict[int, s.Struct] = {
    PARTITION_METADATA: kr.PARTITION_METADATA,
    MEMBER_METADATA: s.Struct(
        (
            ("RackId", s.NULLABLE_STRING),
            ("ClientId", s.STRING),
            ("ClientHost", s.STRING),
            ("SubscribedTopicNames", s.Array(s.STRING)),
        )
    ),
    GROUP_METADATA: s.Struct((("Epoch", s.INT32),)),
    TARGET_METADATA: s.Struct((("AssignmentEpoch", s.INT32),)),
    TARGET_MEMBER: s.Struct((("TopicPartitions", s.Array(kr.TOPIC_PARTITIONS)),)),
    CURRENT_ASSIGNMENT: s.Struct(
        (
            ("MemberEpoch", s.INT32),
            ("PreviousMemberEpoch", s.INT32),
            ("State", s.INT8),
            ("AssignedPartitions", s.Array(kr.TOPIC_PARTITIONS)),
        )
    ),
}
_MEMBER_KEYED = frozenset({MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT})


def _value(record_type: int, fields: dict[str, Any]) -> bytes:
    return kr.value(VALUES[record_type], fields)


def group_tombstones(group_id: str) -> list[tuple[bytes, bytes | None]]:
    """What deletes a share group with no members left, ShareGroupMetadata's tombstone last (Kafka's order)."""
    return [(kr.key(t, group_id), None) for t in (TARGET_METADATA, PARTITION_METADATA, GROUP_METADATA)]


def encode(r: GroupRecord, topic_ids: Mapping[str, uuid.UUID]) -> tuple[bytes, bytes | None]:
    """The (key, value) to write for ``r``, naming topics by the ids in ``topic_ids``."""
    g = r.group_id
    if isinstance(r, ShareGroupMetadata):
        return kr.key(GROUP_METADATA, g), _value(GROUP_METADATA, {"Epoch": r.epoch})
    if isinstance(r, ShareGroupPartitionMetadata):
        return kr.key(PARTITION_METADATA, g), _value(PARTITION_METADATA, kr.partition_metadata(r.topics, topic_ids))
    if isinstance(r, ShareGroupMemberMetadata):
        fields: dict[str, Any] = {
            "RackId": r.rack_id,
            "ClientId": r.client_id,
            "ClientHost": r.client_host,
            "SubscribedTopicNames": list(r.subscribed_topic_names),
        }
        return kr.key(MEMBER_METADATA, g, r.member_id), _value(MEMBER_METADATA, fields)
    if isinstance(r, ShareGroupTargetAssignmentMetadata):
        return kr.key(TARGET_METADATA, g), _value(TARGET_METADATA, {"AssignmentEpoch": r.assignment_epoch})
    if isinstance(r, ShareGroupTargetAssignmentMember):
        what = f"share group {g} target of {r.member_id}"
        value = {"TopicPartitions": kr.by_topic_id(r.partitions, topic_ids, what)}
        return kr.key(TARGET_MEMBER, g, r.member_id), _value(TARGET_MEMBER, value)
    if isinstance(r, ShareGroupCurrentMemberAssignment):
        what = f"share group {g} assignment of {r.member_id}"
        fields = {
            "MemberEpoch": r.member_epoch,
            "PreviousMemberEpoch": r.previous_member_epoch,
            "State": STABLE,
            "AssignedPartitions": kr.by_topic_id(r.assigned, topic_ids, what),
        }
        return kr.key(CURRENT_ASSIGNMENT, g, r.member_id), _value(CURRENT_ASSIGNMENT, fields)
    if isinstance(r, ShareGroupMemberMetadataTombstone):
        return kr.key(MEMBER_METADATA, g, r.member_id), None
    if isinstance(r, ShareGroupTargetAssignmentMemberTombstone):
        return kr.key(TARGET_MEMBER, g, r.member_id), None
    return kr.key(CURRENT_ASSIGNMENT, g, r.member_id), None  # ShareGroupCurrentMemberAssignmentTombstone


def is_share_key(key: bytes) -> bool:
    """A KIP-932 group record's key, in Kafka's format or our old one."""
    return kr.record_type(key) in KEY_VERSIONS


_Decoder = Callable[[str, str, dict[str, Any], Mapping[uuid.UUID, str]], GroupRecord]
_DECODE: dict[int, _Decoder] = {
    GROUP_METADATA: lambda g, _m, f, _n: ShareGroupMetadata(g, f["Epoch"]),
    PARTITION_METADATA: lambda g, _m, f, _n: ShareGroupPartitionMetadata(g, kr.topics_of(f)),
    MEMBER_METADATA: lambda g, m, f, _n: ShareGroupMemberMetadata(
        g, m, f["RackId"], f["ClientId"], f["ClientHost"], tuple(f["SubscribedTopicNames"])
    ),
    TARGET_METADATA: lambda g, _m, f, _n: ShareGroupTargetAssignmentMetadata(g, f["AssignmentEpoch"]),
    TARGET_MEMBER: lambda g, m, f, n: ShareGroupTargetAssignmentMember(g, m, kr.by_topic_name(f["TopicPartitions"], n)),
    CURRENT_ASSIGNMENT: lambda g, m, f, n: ShareGroupCurrentMemberAssignment(
        g, m, f["MemberEpoch"], f["PreviousMemberEpoch"], kr.by_topic_name(f["AssignedPartitions"], n)
    ),
}
_TOMBSTONES: dict[int, Callable[[str, str], GroupRecord]] = {
    MEMBER_METADATA: ShareGroupMemberMetadataTombstone,
    TARGET_MEMBER: ShareGroupTargetAssignmentMemberTombstone,
    CURRENT_ASSIGNMENT: ShareGroupCurrentMemberAssignmentTombstone,
}


_FAMILY = kr.RecordFamily(
    "share group",
    GROUP_METADATA,
    VALUES,
    _DECODE,
    _TOMBSTONES,
    _MEMBER_KEYED,
    ShareGroupDeleted,
    old.KEY_VERSIONS,
    old.decode,
)


def decode(
    key: bytes, value: bytes | None, topic_names: Mapping[uuid.UUID, str]
) -> GroupRecord | ShareGroupDeleted | None:
    """The record a (key, value) holds (kafka_records.RecordFamily.decode)."""
    return _FAMILY.decode(key, value, topic_names)
