"""Record batch v2 header operations: read the 61-byte header, check the CRC32C, patch in place.

Batches stay opaque bytes on the produce and replication paths. The CRC covers bytes 21..end,
so baseOffset (0-7) and partitionLeaderEpoch (12-15) can be rewritten without recomputing it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: bytes before the length-counted part
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAGIC_V2 = 2

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20

# baseOffset q, batchLength i, partitionLeaderEpoch i, magic b, crc I, attributes h,
# lastOffsetDelta i, baseTimestamp q, maxTimestamp q, producerId q, producerEpoch h,
# baseSequence i, recordCount i
_HEADER = struct.Struct(">qiibIhiqqqhii")
_Q = struct.Struct(">q")
_I = struct.Struct(">i")


class CorruptBatchError(ValueError):
    """A batch whose framing, magic or CRC is wrong."""


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse the header at ``pos``; raises CorruptBatchError when it cannot be a v2 batch."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptBatchError(f"short batch header: {len(buf) - pos} bytes at position {pos}")
    h = BatchHeader(*_HEADER.unpack_from(buf, pos))
    if h.magic != MAGIC_V2:
        raise CorruptBatchError(f"unsupported record batch magic {h.magic} at position {pos}")
    if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptBatchError(f"batch length {h.batch_length} below the header size at position {pos}")
    return h


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> int:
    end = pos + header.size
    return crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : end])


def crc_ok(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> bool:
    if len(buf) - pos < header.size:
        return False
    return compute_crc(buf, pos, header) == header.crc


def iter_batches(buf: bytes | bytearray | memoryview, validate_crc: bool = True) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each whole batch in ``buf``.

    Raises CorruptBatchError on a partial or corrupt batch, so the caller can decide whether
    that means a bad request (produce) or a torn tail (recovery).
    """
    pos = 0
    n = len(buf)
    while pos < n:
        h = read_header(buf, pos)
        if pos + h.size > n:
            raise CorruptBatchError(f"batch at position {pos} needs {h.size} bytes, {n - pos} left")
        if validate_crc and compute_crc(buf, pos, h) != h.crc:
            raise CorruptBatchError(f"CRC32C mismatch in batch at position {pos} (base offset {h.base_offset})")
        yield pos, h
        pos += h.size


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    _Q.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _I.pack_into(buf, pos + 12, epoch)


def set_max_timestamp_log_append(buf: bytearray | memoryview, pos: int, now_ms: int) -> None:
    """For LogAppendTime topics: set the timestamp type bit and maxTimestamp, then re-CRC."""
    attrs = struct.unpack_from(">h", buf, pos + ATTRIBUTES_OFFSET)[0] | TIMESTAMP_TYPE_MASK
    struct.pack_into(">h", buf, pos + ATTRIBUTES_OFFSET, attrs)
    struct.pack_into(">q", buf, pos + 35, now_ms)
    length = _I.unpack_from(buf, pos + 8)[0]
    crc = crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + LOG_OVERHEAD + length])
    struct.pack_into(">I", buf, pos + CRC_OFFSET, crc)
