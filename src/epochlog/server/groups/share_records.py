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

import json
import struct
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
from epochlog.groups.share.model import Assignment

PARTITION_METADATA = 1009
MEMBER_METADATA = 1010
GROUP_METADATA = 1011
TARGET_METADATA = 1012
TARGET_MEMBER = 1013
CURRENT_ASSIGNMENT = 1014
KEY_VERSIONS = frozenset(range(PARTITION_METADATA, CURRENT_ASSIGNMENT + 1))
VALUE_VERSION = 0


@dataclass(frozen=True)
class ShareGroupDeleted:
    group_id: str


def _key(version: int, *parts: str) -> bytes:
    out = bytearray(struct.pack(">h", version))
    for s in parts:
        b = s.encode()
        out += struct.pack(">h", len(b)) + b
    return bytes(out)


def _value(fields: dict[str, Any]) -> bytes:
    return struct.pack(">h", VALUE_VERSION) + json.dumps(fields, separators=(",", ":"), sort_keys=True).encode()


def _tps(a: Assignment) -> list[list[Any]]:
    return [[t, p] for t, p in sorted(a)]


def _assignment(v: list[list[Any]]) -> Assignment:
    return frozenset((str(t), int(p)) for t, p in v)


def group_tombstone(group_id: str) -> tuple[bytes, None]:
    return _key(GROUP_METADATA, group_id), None


def encode(r: GroupRecord) -> tuple[bytes, bytes | None]:
    g = r.group_id
    if isinstance(r, ShareGroupMetadata):
        return _key(GROUP_METADATA, g), _value({"epoch": r.epoch})
    if isinstance(r, ShareGroupPartitionMetadata):
        return _key(PARTITION_METADATA, g), _value({"topics": [[t, n] for t, n in r.topics]})
    if isinstance(r, ShareGroupMemberMetadata):
        fields: dict[str, Any] = {
            "rack_id": r.rack_id,
            "client_id": r.client_id,
            "client_host": r.client_host,
            "topics": list(r.subscribed_topic_names),
        }
        return _key(MEMBER_METADATA, g, r.member_id), _value(fields)
    if isinstance(r, ShareGroupMemberMetadataTombstone):
        return _key(MEMBER_METADATA, g, r.member_id), None
    if isinstance(r, ShareGroupTargetAssignmentMetadata):
        return _key(TARGET_METADATA, g), _value({"epoch": r.assignment_epoch})
    if isinstance(r, ShareGroupTargetAssignmentMember):
        return _key(TARGET_MEMBER, g, r.member_id), _value({"partitions": _tps(r.partitions)})
    if isinstance(r, ShareGroupTargetAssignmentMemberTombstone):
        return _key(TARGET_MEMBER, g, r.member_id), None
    if isinstance(r, ShareGroupCurrentMemberAssignment):
        fields = {"epoch": r.member_epoch, "previous_epoch": r.previous_member_epoch, "assigned": _tps(r.assigned)}
        return _key(CURRENT_ASSIGNMENT, g, r.member_id), _value(fields)
    return _key(CURRENT_ASSIGNMENT, g, r.member_id), None  # ShareGroupCurrentMemberAssignmentTombstone


def is_share_key(key: bytes) -> bool:
    return len(key) >= 2 and struct.unpack_from(">h", key, 0)[0] in KEY_VERSIONS


def _read_key(data: bytes) -> tuple[int, list[str]]:
    (version,) = struct.unpack_from(">h", data, 0)
    pos, parts = 2, []
    while pos < len(data):
        (n,) = struct.unpack_from(">h", data, pos)
        parts.append(data[pos + 2 : pos + 2 + n].decode())
        pos += 2 + n
    return version, parts


def _member(g: str, m: str, f: dict[str, Any]) -> GroupRecord:
    return ShareGroupMemberMetadata(g, m, f["rack_id"], f["client_id"], f["client_host"], tuple(f["topics"]))


_DECODE: dict[int, Callable[[str, str, dict[str, Any]], GroupRecord]] = {
    GROUP_METADATA: lambda g, _m, f: ShareGroupMetadata(g, f["epoch"]),
    PARTITION_METADATA: lambda g, _m, f: ShareGroupPartitionMetadata(g, tuple((t, n) for t, n in f["topics"])),
    MEMBER_METADATA: _member,
    TARGET_METADATA: lambda g, _m, f: ShareGroupTargetAssignmentMetadata(g, f["epoch"]),
    TARGET_MEMBER: lambda g, m, f: ShareGroupTargetAssignmentMember(g, m, _assignment(f["partitions"])),
    CURRENT_ASSIGNMENT: lambda g, m, f: ShareGroupCurrentMemberAssignment(
        g, m, f["epoch"], f["previous_epoch"], _assignment(f["assigned"])
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
    try:
        version, parts = _read_key(key)
        if version not in KEY_VERSIONS or not parts:
            return None
        group_id, member_id = parts[0], parts[1] if len(parts) > 1 else ""
        if value is None:
            tomb = _TOMBSTONES.get(version)
            return tomb(group_id, member_id) if tomb is not None else None
        (value_version,) = struct.unpack_from(">h", value, 0)
        if value_version != VALUE_VERSION:
            raise ValueError(f"unknown value version {value_version} of key version {version}")
        return _DECODE[version](group_id, member_id, json.loads(value[2:]))
    except (struct.error, KeyError, TypeError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"unreadable share group record: {e}") from e
