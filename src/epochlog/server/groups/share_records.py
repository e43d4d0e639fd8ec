"""How the KIP-932 share group records (epochlog.groups.share.group_records) are kept in ``__consumer_offsets``.

As the KIP-848 records (consumer_records.py): our values name topics by name, so the keys take Kafka's key
versions plus 1000, which Kafka's loader skips and our classic loader ignores:

    1009 ShareGroupPartitionMetadata          key: group
    1010 ShareGroupMemberMetadata             key: group, member id
    1011 ShareGroupMetadata                   key: group
    1012 ShareGroupTargetAssignmentMetadata   key: group
    1013 ShareGroupTargetAssignmentMember     key: group, member id
    1014 ShareGroupCurrentMemberAssignment    key: group, member id

Keys and values are laid out as consumer_records.py lays them out (int16 version, int16-length strings; a
value is int16 0 and UTF-8 JSON). A ShareGroupMetadata tombstone deletes the whole group.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
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
from epochlog.server.groups import json_records as jr

PARTITION_METADATA = 1009
MEMBER_METADATA = 1010
GROUP_METADATA = 1011
TARGET_METADATA = 1012
TARGET_MEMBER = 1013
CURRENT_ASSIGNMENT = 1014
KEY_VERSIONS = frozenset(range(PARTITION_METADATA, CURRENT_ASSIGNMENT + 1))


@dataclass(frozen=True)
class ShareGroupDeleted:
    group_id: str


def group_tombstone(group_id: str) -> tuple[bytes, None]:
    return jr.key(GROUP_METADATA, group_id), None


def encode(r: GroupRecord) -> tuple[bytes, bytes | None]:
    g = r.group_id
    if isinstance(r, ShareGroupMetadata):
        return jr.key(GROUP_METADATA, g), jr.value({"epoch": r.epoch})
    if isinstance(r, ShareGroupPartitionMetadata):
        return jr.key(PARTITION_METADATA, g), jr.value({"topics": [[t, n] for t, n in r.topics]})
    if isinstance(r, ShareGroupMemberMetadata):
        fields: dict[str, Any] = {
            "rack_id": r.rack_id,
            "client_id": r.client_id,
            "client_host": r.client_host,
            "topics": list(r.subscribed_topic_names),
        }
        return jr.key(MEMBER_METADATA, g, r.member_id), jr.value(fields)
    if isinstance(r, ShareGroupMemberMetadataTombstone):
        return jr.key(MEMBER_METADATA, g, r.member_id), None
    if isinstance(r, ShareGroupTargetAssignmentMetadata):
        return jr.key(TARGET_METADATA, g), jr.value({"epoch": r.assignment_epoch})
    if isinstance(r, ShareGroupTargetAssignmentMember):
        return jr.key(TARGET_MEMBER, g, r.member_id), jr.value({"partitions": jr.pairs(r.partitions)})
    if isinstance(r, ShareGroupTargetAssignmentMemberTombstone):
        return jr.key(TARGET_MEMBER, g, r.member_id), None
    if isinstance(r, ShareGroupCurrentMemberAssignment):
        fields = {"epoch": r.member_epoch, "previous_epoch": r.previous_member_epoch, "assigned": jr.pairs(r.assigned)}
        return jr.key(CURRENT_ASSIGNMENT, g, r.member_id), jr.value(fields)
    return jr.key(CURRENT_ASSIGNMENT, g, r.member_id), None  # ShareGroupCurrentMemberAssignmentTombstone


def is_share_key(key: bytes) -> bool:
    return jr.key_version_in(key, KEY_VERSIONS)


def _member(g: str, m: str, f: dict[str, Any]) -> GroupRecord:
    return ShareGroupMemberMetadata(g, m, f["rack_id"], f["client_id"], f["client_host"], tuple(f["topics"]))


_DECODE: dict[int, Callable[[str, str, dict[str, Any]], GroupRecord]] = {
    GROUP_METADATA: lambda g, _m, f: ShareGroupMetadata(g, f["epoch"]),
    PARTITION_METADATA: lambda g, _m, f: ShareGroupPartitionMetadata(g, tuple((t, n) for t, n in f["topics"])),
    MEMBER_METADATA: _member,
    TARGET_METADATA: lambda g, _m, f: ShareGroupTargetAssignmentMetadata(g, f["epoch"]),
    TARGET_MEMBER: lambda g, m, f: ShareGroupTargetAssignmentMember(g, m, jr.partitions(f["partitions"])),
    CURRENT_ASSIGNMENT: lambda g, m, f: ShareGroupCurrentMemberAssignment(
        g, m, f["epoch"], f["previous_epoch"], jr.partitions(f["assigned"])
    ),
}
_TOMBSTONES: dict[int, Callable[[str, str], GroupRecord | ShareGroupDeleted]] = {
    GROUP_METADATA: lambda g, _m: ShareGroupDeleted(g),
    MEMBER_METADATA: ShareGroupMemberMetadataTombstone,
    TARGET_MEMBER: ShareGroupTargetAssignmentMemberTombstone,
    CURRENT_ASSIGNMENT: ShareGroupCurrentMemberAssignmentTombstone,
}


def decode(key: bytes, value: bytes | None) -> GroupRecord | ShareGroupDeleted | None:
    """The record a (key, value) of ours holds; None for another kind. Raises ValueError on bad bytes."""
    return jr.decode(key, value, _DECODE, _TOMBSTONES, "share group")
