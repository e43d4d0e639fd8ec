"""The format epochlog wrote the KIP-848 group records in before it wrote Kafka's (consumer_records.py), kept so
that a log written then still loads; nothing writes it any more.

The key versions were Kafka's plus 1000, with values of our own:

    1003 ConsumerGroupMetadata                 key: group
    1004 ConsumerGroupPartitionMetadata        key: group
    1005 ConsumerGroupMemberMetadata           key: group, member id
    1006 ConsumerGroupTargetAssignmentMetadata key: group
    1007 ConsumerGroupTargetAssignmentMember   key: group, member id
    1008 ConsumerGroupCurrentMemberAssignment  key: group, member id

Keys: version int16, then int16-length strings, as Kafka's keys. A value is a version int16 (0) followed by
the record's fields as UTF-8 JSON (partitions as [topic name, partition] pairs). A tombstone is a key with no
value; a ConsumerGroupMetadata tombstone deletes the whole group.
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
    """The ConsumerGroupMetadata tombstone (in either format): the group and all its records before it are gone."""

    group_id: str


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
    """The record an old-format (key, value) holds; None for another kind of record (or a tombstone of a record
    that has none). Raises ValueError on bytes that do not parse."""
    return jr.decode(key, value, _DECODE, _TOMBSTONES, "consumer group")
