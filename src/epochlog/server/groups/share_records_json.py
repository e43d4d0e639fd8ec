"""The format epochlog wrote the KIP-932 share group records in before it wrote Kafka's (share_records.py), kept
so that a log written then still loads; nothing writes it any more. The key versions were Kafka's plus 1000:

    1009 ShareGroupPartitionMetadata          key: group
    1010 ShareGroupMemberMetadata             key: group, member id
    1011 ShareGroupMetadata                   key: group
    1012 ShareGroupTargetAssignmentMetadata   key: group
    1013 ShareGroupTargetAssignmentMember     key: group, member id
    1014 ShareGroupCurrentMemberAssignment    key: group, member id

Keys and values are laid out as consumer_records_json.py lays them out (int16 version, int16-length strings; a
value is int16 0 and UTF-8 JSON, topics by name). A ShareGroupMetadata tombstone deletes the whole group.
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
    """The ShareGroupMetadata tombstone (in either format): the group and all its records before it are gone."""

    group_id: str


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
    """The record an old-format (key, value) holds; None for another kind. Raises ValueError on bad bytes."""
    return jr.decode(key, value, _DECODE, _TOMBSTONES, "share group")
