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

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from epochlog.groups.consumer.model import Assignment
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

GROUP_METADATA = 1003
PARTITION_METADATA = 1004
MEMBER_METADATA = 1005
TARGET_METADATA = 1006
TARGET_MEMBER = 1007
CURRENT_ASSIGNMENT = 1008
KEY_VERSIONS = frozenset(range(GROUP_METADATA, CURRENT_ASSIGNMENT + 1))
VALUE_VERSION = 0


@dataclass(frozen=True)
class GroupDeleted:
    """The ConsumerGroupMetadata tombstone: the group and all its records before it are gone."""

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


def encode(r: Record) -> tuple[bytes, bytes | None] | None:
    """The (key, value) to write for ``r``; None for what is not kept here (offsets go as OffsetCommit records)."""
    g = r.group_id
    if isinstance(r, ConsumerGroupMetadata):
        return _key(GROUP_METADATA, g), _value({"epoch": r.epoch})
    if isinstance(r, ConsumerGroupPartitionMetadata):
        return _key(PARTITION_METADATA, g), _value({"topics": [[t, n] for t, n in r.topics]})
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
        return _key(MEMBER_METADATA, g, r.member_id), _value(fields)
    if isinstance(r, ConsumerGroupMemberMetadataTombstone):
        return _key(MEMBER_METADATA, g, r.member_id), None
    if isinstance(r, ConsumerGroupTargetAssignmentMetadata):
        return _key(TARGET_METADATA, g), _value({"epoch": r.assignment_epoch})
    if isinstance(r, ConsumerGroupTargetAssignmentMember):
        return _key(TARGET_MEMBER, g, r.member_id), _value({"partitions": _tps(r.partitions)})
    if isinstance(r, ConsumerGroupTargetAssignmentMemberTombstone):
        return _key(TARGET_MEMBER, g, r.member_id), None
    if isinstance(r, ConsumerGroupCurrentMemberAssignment):
        fields = {
            "epoch": r.member_epoch,
            "previous_epoch": r.previous_member_epoch,
            "state": r.state,
            "assigned": _tps(r.assigned),
            "pending_revocation": _tps(r.pending_revocation),
        }
        return _key(CURRENT_ASSIGNMENT, g, r.member_id), _value(fields)
    if isinstance(r, ConsumerGroupCurrentMemberAssignmentTombstone):
        return _key(CURRENT_ASSIGNMENT, g, r.member_id), None
    return None


def _read_key(data: bytes) -> tuple[int, list[str]]:
    (version,) = struct.unpack_from(">h", data, 0)
    pos, parts = 2, []
    while pos < len(data):
        (n,) = struct.unpack_from(">h", data, pos)
        parts.append(data[pos + 2 : pos + 2 + n].decode())
        pos += 2 + n
    return version, parts


def is_consumer_key(key: bytes) -> bool:
    return len(key) >= 2 and struct.unpack_from(">h", key, 0)[0] in KEY_VERSIONS


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
        _assignment(f["assigned"]),
        _assignment(f["pending_revocation"]),
    )


_DECODE: dict[int, Callable[[str, str, dict[str, Any]], Record]] = {
    GROUP_METADATA: lambda g, _m, f: ConsumerGroupMetadata(g, f["epoch"]),
    PARTITION_METADATA: lambda g, _m, f: ConsumerGroupPartitionMetadata(g, tuple((t, n) for t, n in f["topics"])),
    MEMBER_METADATA: _member_metadata,
    TARGET_METADATA: lambda g, _m, f: ConsumerGroupTargetAssignmentMetadata(g, f["epoch"]),
    TARGET_MEMBER: lambda g, m, f: ConsumerGroupTargetAssignmentMember(g, m, _assignment(f["partitions"])),
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
        raise ValueError(f"unreadable consumer group record: {e}") from e
