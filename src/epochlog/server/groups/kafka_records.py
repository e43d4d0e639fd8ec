"""What Kafka's group coordinator records in ``__consumer_offsets`` share, for the KIP-848 records
(consumer_records.py) and the KIP-932 ones (share_records.py): a key is the record type (int16) followed by the
key struct, not flexible (GroupId and, for a member's record, MemberId as int16-length strings); a value is the
value's version (int16, 0 for every record here) followed by the value struct, flexible; a tombstone is a key
with no value. Topics are named by id in Kafka's records: ``by_topic_id`` and ``by_topic_name`` translate with
the ids the cluster's metadata has."""

from __future__ import annotations

import logging
import struct
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from epochlog.protocol import struct_schema as s

log = logging.getLogger("epochlog.groups")

VALUE_VERSION = 0
NO_TOPIC_ID = uuid.UUID(int=0)  # Kafka's Uuid.ZERO_UUID: a topic without an id

GROUP_KEY = s.Struct((("GroupId", s.STRING),))
MEMBER_KEY = s.Struct((("GroupId", s.STRING), ("MemberId", s.STRING)))
TOPIC_PARTITIONS = s.Struct((("TopicId", s.UUID), ("Partitions", s.Array(s.INT32))))
# ConsumerGroupPartitionMetadataValue and ShareGroupPartitionMetadataValue are the same struct.
PARTITION_METADATA = s.Struct(
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
)


def record_type(key: bytes) -> int | None:
    return struct.unpack_from(">h", key, 0)[0] if len(key) >= 2 else None


def key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    if member_id is None:
        return struct.pack(">h", record_type) + s.encode(GROUP_KEY, {"GroupId": group_id}, flexible=False)
    fields = {"GroupId": group_id, "MemberId": member_id}
    return struct.pack(">h", record_type) + s.encode(MEMBER_KEY, fields, flexible=False)


def read_key(data: bytes, member_keyed: bool) -> tuple[str, str]:
    """(group id, member id or "") of a key whose record type was read already."""
    k, _ = s.decode(MEMBER_KEY if member_keyed else GROUP_KEY, data, 2, flexible=False)
    return k["GroupId"], k.get("MemberId", "")


def value(schema: s.Struct, fields: dict[str, Any]) -> bytes:
    return struct.pack(">h", VALUE_VERSION) + s.encode(schema, fields, flexible=True)


def read_value(schema: s.Struct, data: bytes, what: str) -> dict[str, Any]:
    if len(data) < 2:
        raise ValueError(f"{what}: value too short")
    (version,) = struct.unpack_from(">h", data, 0)
    if version != VALUE_VERSION:
        raise ValueError(f"{what}: unknown value version {version}")
    return s.decode(schema, data, 2, flexible=True)[0]


def partition_metadata(topics: Collection[tuple[str, int]], topic_ids: Mapping[str, uuid.UUID]) -> dict[str, Any]:
    """The PartitionMetadata value: the name travels with the id, so a topic without an id keeps Kafka's zero
    id; no racks per partition (Kafka's default, and deprecated there)."""
    rows = [
        {"TopicId": topic_ids.get(t, NO_TOPIC_ID), "TopicName": t, "NumPartitions": n, "PartitionMetadata": []}
        for t, n in topics
    ]
    return {"Topics": rows}


def topics_of(fields: dict[str, Any]) -> tuple[tuple[str, int], ...]:
    return tuple((t["TopicName"], t["NumPartitions"]) for t in fields["Topics"])


def by_topic_id(
    partitions: Collection[tuple[str, int]], topic_ids: Mapping[str, uuid.UUID], what: str
) -> list[dict[str, Any]]:
    """TopicPartitions rows, by topic name order; a topic without an id cannot be named and is left out."""
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


def by_topic_name(rows: list[dict[str, Any]], topic_names: Mapping[uuid.UUID, str]) -> frozenset[tuple[str, int]]:
    """The partitions of TopicPartitions rows by topic name; those of an id the cluster no longer has (the topic
    is gone) are dropped."""
    return frozenset(
        (name, p) for t in rows if (name := topic_names.get(t["TopicId"])) is not None for p in t["Partitions"]
    )


R = TypeVar("R")
D = TypeVar("D")
Decoder = Callable[[str, str, dict[str, Any], Mapping[uuid.UUID, str]], R]


@dataclass(frozen=True)
class RecordFamily(Generic[R, D]):
    """One group protocol's records (KIP-848's or KIP-932's): how each type's value reads, what a tombstone
    of each type deletes, and the reader of the format epochlog wrote before these."""

    name: str  # for errors: "consumer group", "share group"
    group_metadata: int  # the type whose tombstone deletes the group
    values: Mapping[int, s.Struct]
    decoders: Mapping[int, Decoder[R]]
    tombstones: Mapping[int, Callable[[str, str], R]]
    member_keyed: frozenset[int]
    deleted: Callable[[str], D]
    old_versions: frozenset[int]
    old_decode: Callable[[bytes, bytes | None], R | D | None]

    def decode(self, key: bytes, value: bytes | None, topic_names: Mapping[uuid.UUID, str]) -> R | D | None:
        """The record a (key, value) holds, topics named by ``topic_names`` (id to name); None for another
        kind of record or a tombstone that deletes nothing on its own (partition and target metadata go with
        the group). Raises ValueError on bytes that do not parse."""
        rtype = record_type(key)
        if rtype in self.old_versions:
            return self.old_decode(key, value)
        if rtype is None or rtype not in self.decoders:
            return None
        g, m = read_key(key, rtype in self.member_keyed)
        if value is None:
            if rtype == self.group_metadata:
                return self.deleted(g)
            tomb = self.tombstones.get(rtype)
            return tomb(g, m) if tomb is not None else None
        fields = read_value(self.values[rtype], value, f"{self.name} record type {rtype}")
        return self.decoders[rtype](g, m, fields, topic_names)
