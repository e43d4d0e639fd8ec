"""A hand-written Produce request parser: the hot path, zero-copy over the record bytes.

kio would copy every record set into new bytes objects; this reads the few fixed fields and
hands out memoryview slices of the frame. It also reads epochlog's KIP-359 tagged field.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from epochlog.protocol.cursor import Cursor
from epochlog.protocol.errors import InvalidRequest

# KIP-359: the producer's view of the partition leader epoch, a tagged field of the
# partition data. Upstream Produce has no such field; see docs/protocol.md.
CURRENT_LEADER_EPOCH_TAG = 359

_I = struct.Struct(">i")


@dataclass(slots=True)
class PartitionData:
    index: int
    records: memoryview | None
    current_leader_epoch: int = -1


@dataclass(slots=True)
class TopicData:
    name: str | None
    topic_id: uuid.UUID | None
    partitions: list[PartitionData] = field(default_factory=list)


@dataclass(slots=True)
class ProduceRequestData:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topics: list[TopicData]


def parse_produce(body: memoryview, version: int) -> ProduceRequestData:
    if version < 3:
        raise InvalidRequest(f"Produce v{version} (message format v0/v1) is not supported")
    c = Cursor(body, flexible=version >= 9, what="produce request")
    txn = c.string()
    acks = c.i16()
    timeout = c.i32()
    n_topics = c.length()
    if n_topics < 0 or n_topics > len(body):
        raise InvalidRequest(f"bad topic count {n_topics}")
    topics: list[TopicData] = []
    for _ in range(n_topics):
        if version >= 13:
            topic = TopicData(None, uuid.UUID(bytes=bytes(c.raw(16))))
        else:
            topic = TopicData(c.string(), None)
        n_parts = c.length()
        if n_parts < 0 or n_parts > len(body):
            raise InvalidRequest(f"bad partition count {n_parts}")
        for _ in range(n_parts):
            index = c.i32()
            size = c.length()
            records = c.raw(size) if size >= 0 else None
            part = PartitionData(index, records)
            tags = c.tags()
            epoch_bytes = tags.get(CURRENT_LEADER_EPOCH_TAG)
            if epoch_bytes is not None:
                if len(epoch_bytes) != 4:
                    raise InvalidRequest("CurrentLeaderEpoch tag must hold an int32")
                part.current_leader_epoch = _I.unpack(epoch_bytes)[0]
            topic.partitions.append(part)
        c.tags()
        topics.append(topic)
    c.tags()
    return ProduceRequestData(txn, acks, timeout, topics)
