"""A hand-written Produce request parser: the hot path, zero-copy over the record bytes.

kio would copy every record set into new bytes objects; this reads the few fixed fields and
hands out memoryview slices of the frame. It also reads epochlog's KIP-359 tagged field.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from epochlog.protocol.codec import read_varint
from epochlog.protocol.errors import InvalidRequest

# KIP-359: the producer's view of the partition leader epoch, a tagged field of the
# partition data. Upstream Produce has no such field; see docs/protocol.md.
CURRENT_LEADER_EPOCH_TAG = 359

_H = struct.Struct(">h")
_I = struct.Struct(">i")
_HI = struct.Struct(">hi")


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


class _Cursor:
    __slots__ = ("buf", "flexible", "pos")

    def __init__(self, buf: memoryview, flexible: bool) -> None:
        self.buf = buf
        self.pos = 0
        self.flexible = flexible

    def need(self, n: int) -> None:
        if self.pos + n > len(self.buf) or n < 0:
            raise InvalidRequest(f"produce request truncated at byte {self.pos} (needs {n} more)")

    def i16(self) -> int:
        self.need(2)
        v = _H.unpack_from(self.buf, self.pos)[0]
        self.pos += 2
        return v

    def i32(self) -> int:
        self.need(4)
        v = _I.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def varint(self) -> int:
        v, self.pos = read_varint(self.buf, self.pos)
        return v

    def length(self) -> int:
        """Array/string/bytes length; -1 for null."""
        if self.flexible:
            return self.varint() - 1
        return self.i32()

    def string(self) -> str | None:
        n = self.varint() - 1 if self.flexible else self.i16()
        if n < 0:
            return None
        self.need(n)
        s = bytes(self.buf[self.pos : self.pos + n]).decode("utf-8")
        self.pos += n
        return s

    def raw(self, n: int) -> memoryview:
        self.need(n)
        v = self.buf[self.pos : self.pos + n]
        self.pos += n
        return v

    def tags(self) -> dict[int, memoryview]:
        if not self.flexible:
            return {}
        out = {}
        for _ in range(self.varint()):
            tag = self.varint()
            size = self.varint()
            out[tag] = self.raw(size)
        return out


def parse_produce(body: memoryview, version: int) -> ProduceRequestData:
    if version < 3:
        raise InvalidRequest(f"Produce v{version} (message format v0/v1) is not supported")
    c = _Cursor(body, flexible=version >= 9)
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
