"""How the KIP-848 group records (epochlog.groups.consumer.records) are kept in ``__consumer_offsets``.

Kafka writes these records with key versions 3-8 and values that name topics by id. Our records name topics
by name, so their values are not Kafka's; writing them under Kafka's key versions would make a Kafka broker
reading our data dir misread them. They get key versions of their own, Kafka's plus 1000, which Kafka's
loader skips as unknown record types and our classic loader (records.decode_key) ignores:

    1003 ConsumerGroupMetadata                 key: group
    1004 ConsumerGroupPartitionMetadata        key: group
    1005 ConsumerGroupMemberMetadata           key: group, member id
    1006 ConsumerGroupTargetAssignmentMetadata key: group
    1007 ConsumerGroupTargetAssignmentMember   key: group, member id
    1008 ConsumerGroupCurrentMemberAssignment  key: group, member id

Keys: version int16, then int16-length strings, as Kafka's keys. A value is a version int16 (0) followed by
the record's fields as UTF-8 JSON (partitions as [topic, partition] pairs, sorted). A tombstone is a key with
no value, as Kafka deletes. A ConsumerGroupMetadata tombstone deletes the whole group: every record of the
group before it is void (DeleteGroups writes it last).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
from epochlog.server.groups import json_records as jr

GROUP_METADATA = 1003
PARTITION_METADATA = 1004
MEMBER_METADATA = 1005
TARGET_METADATA = 1006
TARGET_MEMBER = 1007
CURRENT_ASSIGNMENT = 1008
KEY_VERSIONS = frozenset(range(GROUP_METADATA, CURRENT_ASSIGNMENT + 1))


@dataclass(frozen=True)
class GroupDeleted:
    """The ConsumerGroupMetadata tombstone: the group and all its records before it are gone."""

    group_id: str


def group_tombstone(group_id: str) -> tuple[bytes, None]:
    return jr.key(GROUP_METADATA, group_id), None


def encode(r: Record) -> tuple[bytes, bytes | None] | None:
    """The (key, value) to write for ``r``; None for what is not kept here (offsets go as OffsetCommit records)."""
    g = r.group_id
    if isinstance(r, ConsumerGroupMetadata):
        return jr.key(GROUP_METADATA, g), jr.value({"epoch": r.epoch})
    if isinstance(r, ConsumerGroupPartitionMetadata):
        return jr.key(PARTITION_METADATA, g), jr.value({"topics": [[t, n] for t, n in r.topics]})
    if isinstance(r, ConsumerGroupMemberMetadata):
        fields: dict[str, Any] = {
            "instance_id": r.instance_id,
            "rack_id": r.rack_id,
            "client_id": r.client_id,
            "client_host": r.client_host,
            "topics": list(r.subscribed_topic_names),
            "regex": r.subscribed_topic_regex,
            "assignor": r.server_assignor,
            "rebalance_timeout_ms": r.rebalance_timeout_ms,
        }
        return jr.key(MEMBER_METADATA, g, r.member_id), jr.value(fields)
    if isinstance(r, ConsumerGroupMemberMetadataTombstone):
        return jr.key(MEMBER_METADATA, g, r.member_id), None
    if isinstance(r, ConsumerGroupTargetAssignmentMetadata):
        return jr.key(TARGET_METADATA, g), jr.value({"epoch": r.assignment_epoch})
    if isinstance(r, ConsumerGroupTargetAssignmentMember):
        return jr.key(TARGET_MEMBER, g, r.member_id), jr.value({"partitions": jr.pairs(r.partitions)})
    if isinstance(r, ConsumerGroupTargetAssignmentMemberTombstone):
        return jr.key(TARGET_MEMBER, g, r.member_id), None
    if isinstance(r, ConsumerGroupCurrentMemberAssignment):
        fields = {
            "epoch": r.member_epoch,
            "previous_epoch": r.previous_member_epoch,
            "state": r.state,
            "assigned": jr.pairs(r.assigned),
            "pending_revocation": jr.pairs(r.pending_revocation),
        }
        return jr.key(CURRENT_ASSIGNMENT, g, r.member_id), jr.value(fields)
    if isinstance(r, ConsumerGroupCurrentMemberAssignmentTombstone):
        return jr.key(CURRENT_ASSIGNMENT, g, r.member_id), None
    return None


def is_consumer_key(key: bytes) -> bool:
    return jr.key_version_in(key, KEY_VERSIONS)


def _member_metadata(g: str, m: str, f: dict[str, Any]) -> Record:
    return ConsumerGroupMemberMetadata(
        g,
        m,
        f["instance_id"],
        f["rack_id"],
        f["client_id"],
        f["client_host"],
        tuple(f["topics"]),
        f["regex"],
        f["assignor"],
        f["rebalance_timeout_ms"],
    )


def _current(g: str, m: str, f: dict[str, Any]) -> Record:
    return ConsumerGroupCurrentMemberAssignment(
        g,
        m,
        f["epoch"],
        f["previous_epoch"],
        f["state"],
        jr.partitions(f["assigned"]),
        jr.partitions(f["pending_revocation"]),
    )


_DECODE: dict[int, Callable[[str, str, dict[str, Any]], Record]] = {
    GROUP_METADATA: lambda g, _m, f: ConsumerGroupMetadata(g, f["epoch"]),
    PARTITION_METADATA: lambda g, _m, f: ConsumerGroupPartitionMetadata(g, tuple((t, n) for t, n in f["topics"])),
    MEMBER_METADATA: _member_metadata,
    TARGET_METADATA: lambda g, _m, f: ConsumerGroupTargetAssignmentMetadata(g, f["epoch"]),
    TARGET_MEMBER: lambda g, m, f: ConsumerGroupTargetAssignmentMember(g, m, jr.partitions(f["partitions"])),
    CURRENT_ASSIGNMENT: _current,
}
_TOMBSTONES: dict[int, Callable[[str, str], Record | GroupDeleted]] = {
    GROUP_METADATA: lambda g, _m: GroupDeleted(g),
    MEMBER_METADATA: ConsumerGroupMemberMetadataTombstone,
    TARGET_MEMBER: ConsumerGroupTargetAssignmentMemberTombstone,
    CURRENT_ASSIGNMENT: ConsumerGroupCurrentMemberAssignmentTombstone,
}


def decode(key: bytes, value: bytes | None) -> Record | GroupDeleted | None:
    """The record a (key, value) of ours holds; None for another kind of record (or a tombstone of a record
    that has none: partition and target metadata are only ever overwritten). Raises ValueError on bytes that
    do not parse."""
    return jr.decode(key, value, _DECODE, _TOMBSTONES, "consumer group")
