"""The key and value formats of ``__consumer_offsets`` records (Kafka's, as facts of the format).

OffsetCommitKey v1:      version int16, group string, topic string, partition int32
OffsetCommitValue v3:    version int16, offset int64, leaderEpoch int32, metadata string, commitTimestamp int64
GroupMetadataKey v2:     version int16, group string
GroupMetadataValue v3:   version int16, protocolType string, generation int32, protocol string?, leader string?,
                         currentStateTimestamp int64, members [memberId, groupInstanceId?, clientId, clientHost,
                         rebalanceTimeout int32, sessionTimeout int32, subscription bytes, assignment bytes]
Strings are int16-length prefixed (-1 for null), bytes and arrays int32-length prefixed.

We write exactly those versions. We read values v0-v4 so that a data dir written by Kafka loads too:
v4 is the first flexible version (compact strings/bytes/arrays as unsigned varint length+1, and a
tagged-field section after each struct, which we skip), OffsetCommitValue v1 carries an
expireTimestamp we ignore.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

# Re-exported: the core keeps the offsets in its groups.
from epochlog.groups.model import OffsetValue as OffsetValue


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    state_timestamp: int
    members: list[tuple[str, str | None, str, str, int, int, bytes, bytes]]


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()

    def i16(self, v: int) -> _Writer:
        self.out += struct.pack(">h", v)
        return self

    def i32(self, v: int) -> _Writer:
        self.out += struct.pack(">i", v)
        return self

    def i64(self, v: int) -> _Writer:
        self.out += struct.pack(">q", v)
        return self

    def string(self, s: str | None) -> _Writer:
        if s is None:
            return self.i16(-1)
        b = s.encode()
        self.i16(len(b))
        self.out += b
        return self

    def bytes_(self, b: bytes | None) -> _Writer:
        if b is None:
            return self.i32(-1)
        self.i32(len(b))
        self.out += b
        return self


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.flexible = False

    def uvarint(self) -> int:
        shift = v = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7
            if shift > 35:
                raise ValueError("unsigned varint too long")

    def skip_tagged_fields(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.pos += self.uvarint()

    def _length(self, wide: bool) -> int:
        if self.flexible:
            return self.uvarint() - 1
        return self.i32() if wide else self.i16()

    def array_len(self) -> int:
        return self._length(True)

    def _take(self, fmt: str, n: int) -> int:
        # struct returns Any; every format passed here decodes one integer.
        v: int = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += n
        return v

    def i16(self) -> int:
        return self._take(">h", 2)

    def i32(self) -> int:
        return self._take(">i", 4)

    def i64(self) -> int:
        return self._take(">q", 8)

    def string(self) -> str | None:
        n = self._length(False)
        if n < 0:
            return None
        s = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return s

    def bytes_(self) -> bytes | None:
        n = self._length(True)
        if n < 0:
            return None
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return b


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return bytes(_Writer().i16(1).string(group).string(topic).i32(partition).out)


def offset_value(v: OffsetValue) -> bytes:
    return bytes(_Writer().i16(3).i64(v.offset).i32(v.leader_epoch).string(v.metadata).i64(v.commit_timestamp).out)


def group_key(group: str) -> bytes:
    return bytes(_Writer().i16(2).string(group).out)


def group_value(v: GroupValue) -> bytes:
    w = _Writer().i16(3).string(v.protocol_type).i32(v.generation).string(v.protocol).string(v.leader)
    w.i64(v.state_timestamp).i32(len(v.members))
    for mid, iid, cid, host, rto, sto, sub, asg in v.members:
        w.string(mid).string(iid).string(cid).string(host).i32(rto).i32(sto).bytes_(sub).bytes_(asg)
    return bytes(w.out)


def decode_key(data: bytes) -> OffsetKey | GroupKey | None:
    r = _Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string() or "", r.string() or "", r.i32())
    if version == 2:
        return GroupKey(r.string() or "")
    return None  # other record kinds (e.g. transactions) are not ours to read


def decode_offset_value(data: bytes) -> OffsetValue:
    r = _Reader(data)
    version = r.i16()
    r.flexible = version >= 4
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.string() or ""
    ts = r.i64()
    return OffsetValue(offset, epoch, metadata, ts)


def decode_group_value(data: bytes) -> GroupValue:
    r = _Reader(data)
    version = r.i16()
    r.flexible = version >= 4
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(max(r.array_len(), 0)):
        mid = r.string() or ""
        iid = r.string() if version >= 3 else None
        cid = r.string() or ""
        host = r.string() or ""
        rto = r.i32() if version >= 1 else 0
        sto = r.i32()
        members.append((mid, iid, cid, host, rto, sto, r.bytes_() or b"", r.bytes_() or b""))
        r.skip_tagged_fields()
    return GroupValue(protocol_type, generation, protocol, leader, ts, members)
