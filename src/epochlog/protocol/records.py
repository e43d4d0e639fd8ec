"""Records inside a magic-v2 record batch: build batches and decode them, with all four codecs.

The broker never decodes records on the produce or replication path; this is for the places
that must (the group coordinator's ``__consumer_offsets`` records, dump-log, tests, Spark).

Record layout (Kafka's ``DefaultRecord``), all varints zigzag-encoded::

    length varint | attributes int8 | timestampDelta varlong | offsetDelta varint
    | keyLength varint | key | valueLength varint | value | headerCount varint
    | headers [keyLength varint | key utf8 | valueLength varint | value]

Codecs go through ``cramjam``. Wire formats, and why:

- gzip (1), zstd (4): standard streams.
- snappy (2): we write raw snappy (what librdkafka writes). We read raw and the xerial framing the
  Java client writes (``\\x82SNAPPY\\x00`` + two int32 versions, then int32-length-prefixed raw
  blocks). Java (snappy-java's SnappyInputStream falls back to raw), librdkafka and kafka-python
  read both, so either is safe to hand to a consumer.
- lz4 (3): the LZ4 *frame* format with independent blocks. Kafka's Java KafkaLZ4BlockInputStream
  rejects linked blocks ("Dependent block stream is unsupported"), and cramjam's default frame
  links them, so we build the frame with ``block_linked=False``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import cramjam
import crc32c

from epochlog.clock import now_ms
from epochlog.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    CorruptBatchError,
    compute_crc,
    iter_batches,
    read_header,
)

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
CREATE_TIME, LOG_APPEND_TIME = 0, 1
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16  # magic (8) + version int32 + compatible version int32

# The batch fields after the CRC: attributes h, lastOffsetDelta i, baseTimestamp q, maxTimestamp q,
# producerId q, producerEpoch h, baseSequence i, recordCount i.
_TAIL = struct.Struct(">hiqqqhii")
# baseOffset q, batchLength i, partitionLeaderEpoch i, magic b, crc I.
_HEAD = struct.Struct(">qiibI")
_I32 = struct.Struct(">i")

Buffer = bytes | bytearray | memoryview


@dataclass
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


# -- varints -----------------------------------------------------------------------------------
def write_varint(out: bytearray, n: int) -> None:
    """Zigzag varint/varlong (the same encoding for both; only the range differs)."""
    v = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def read_varint(buf: Buffer, pos: int, end: int | None = None) -> tuple[int, int]:
    """Zigzag varint at ``pos``, read no further than ``end`` (the buffer's end by default)."""
    shift = 0
    v = 0
    n = len(buf) if end is None else end
    while True:
        if pos >= n:
            raise CorruptBatchError("varint runs past the end of the records")
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise CorruptBatchError("varint longer than 10 bytes")
    return (v >> 1) ^ -(v & 1), pos


def _write_bytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(b))
        out += b


def _read_bytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_varint(buf, pos)
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise CorruptBatchError("record field runs past the end of the records")
    return bytes(buf[pos : pos + n]), pos + n


# -- codecs ------------------------------------------------------------------------------------
def compress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:
        c = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
        c.compress(data)
        return bytes(c.finish())
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec {codec}")


def _snappy_xerial_decode(data: bytes) -> bytes:
    out = bytearray()
    pos = _XERIAL_HEADER_SIZE
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptBatchError("truncated xerial snappy block length")
        (n,) = _I32.unpack_from(data, pos)
        pos += 4
        if n < 0 or pos + n > len(data):
            raise CorruptBatchError("truncated xerial snappy block")
        out += bytes(cramjam.snappy.decompress_raw(data[pos : pos + n]))
        pos += n
    return bytes(out)


def decompress(codec: int, data: bytes) -> bytes:
    """Raises CorruptBatchError for an unknown codec or data the codec rejects."""
    if codec == NONE:
        return data
    try:
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(data))
        if codec == SNAPPY:
            if data.startswith(_XERIAL_MAGIC):
                return _snappy_xerial_decode(data)
            return bytes(cramjam.snappy.decompress_raw(data))
        if codec == LZ4:
            return bytes(cramjam.lz4.decompress(data))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except CorruptBatchError:
        raise
    except Exception as e:  # cramjam raises its own DecompressionError types per codec
        raise CorruptBatchError(f"cannot decompress {CODEC_NAMES[codec]} records: {e}") from e
    raise CorruptBatchError(f"unknown compression codec {codec}")


# -- build -------------------------------------------------------------------------------------
def _encode_record(out: bytearray, rec: bytearray, ts_delta: int, offset_delta: int, r: Record) -> None:
    rec.clear()
    rec.append(0)  # record attributes: unused in v2
    write_varint(rec, ts_delta)
    write_varint(rec, offset_delta)
    _write_bytes(rec, r.key)
    _write_bytes(rec, r.value)
    write_varint(rec, len(r.headers))
    for hk, hv in r.headers:
        _write_bytes(rec, hk.encode())
        _write_bytes(rec, hv)
    write_varint(out, len(rec))
    out += rec


def build_batch(
    records: Sequence[Record | tuple[bytes | None, bytes | None]],
    *,
    base_offset: int = 0,
    base_timestamp: int | None = None,
    compression: int = NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    is_control: bool = False,
    is_transactional: bool = False,
    timestamp_type: int = CREATE_TIME,
) -> bytes:
    """A complete v2 batch with a correct CRC32C.

    ``records`` are Record objects or plain (key, value) pairs (stamped with ``base_timestamp``).
    Offset deltas are 0..n-1 in list order (a batch's offsets are contiguous), so a Record's own
    ``offset`` is ignored; its ``timestamp`` is kept. ``base_timestamp`` defaults to the first
    Record's timestamp, as Kafka's builder does, else to the wall clock.
    """
    if base_timestamp is None:
        first = records[0] if records else None
        base_timestamp = first.timestamp if isinstance(first, Record) else now_ms()
    body = bytearray()
    scratch = bytearray()
    max_ts = -1
    for i, r in enumerate(records):
        if not isinstance(r, Record):
            r = Record(i, base_timestamp, r[0], r[1])
        max_ts = max(max_ts, r.timestamp)
        _encode_record(body, scratch, r.timestamp - base_timestamp, i, r)
    if not records:
        max_ts = base_timestamp
    payload = compress(compression, bytes(body))
    attributes = (
        (compression & COMPRESSION_MASK)
        | (TIMESTAMP_TYPE_MASK if timestamp_type == LOG_APPEND_TIME else 0)
        | (TRANSACTIONAL_MASK if is_transactional else 0)
        | (CONTROL_MASK if is_control else 0)
    )
    n = len(records)
    tail = _TAIL.pack(attributes, n - 1, base_timestamp, max_ts, producer_id, producer_epoch, base_sequence, n)
    crc = crc32c.crc32c(tail + payload)
    # batchLength counts everything after itself: epoch (4) + magic (1) + crc (4) + tail + payload.
    length = HEADER_SIZE - LOG_OVERHEAD + len(payload)
    return _HEAD.pack(base_offset, length, partition_leader_epoch, MAGIC_V2, crc) + tail + payload


# -- decode ------------------------------------------------------------------------------------
def decode_batch(buf: Buffer, pos: int = 0, *, verify_crc: bool = True) -> tuple[BatchHeader, list[Record]]:
    """Decode the batch at ``pos``. Raises CorruptBatchError on a short, corrupt or undecodable batch.

    With LogAppendTime every record carries the batch's maxTimestamp, as Kafka reports it.
    """
    h = read_header(buf, pos)
    if pos + h.size > len(buf):
        raise CorruptBatchError(f"batch at position {pos} needs {h.size} bytes, {len(buf) - pos} left")
    if verify_crc and compute_crc(buf, pos, h) != h.crc:
        raise CorruptBatchError(f"CRC32C mismatch in batch at position {pos} (base offset {h.base_offset})")
    data = decompress(h.compression, bytes(buf[pos + HEADER_SIZE : pos + h.size]))
    out: list[Record] = []
    p = 0
    for _ in range(h.record_count):
        length, p = read_varint(data, p)
        end = p + length
        if length < 1 or end > len(data):
            raise CorruptBatchError(f"record of {length} bytes runs past the batch at base offset {h.base_offset}")
        p += 1  # record attributes: unused in v2
        ts_delta, p = read_varint(data, p)
        off_delta, p = read_varint(data, p)
        key, p = _read_bytes(data, p)
        value, p = _read_bytes(data, p)
        nh, p = read_varint(data, p)
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(nh):
            hk, p = _read_bytes(data, p)
            hv, p = _read_bytes(data, p)
            headers.append(((hk or b"").decode("utf-8", "replace"), hv))
        if p > end:
            raise CorruptBatchError(f"record fields overrun the record length in batch at {h.base_offset}")
        ts = h.max_timestamp if h.is_log_append_time else h.base_timestamp + ts_delta
        out.append(Record(h.base_offset + off_delta, ts, key, value, headers))
        p = end
    return h, out


def iter_records(buf: Buffer, *, verify_crc: bool = True) -> Iterator[Record]:
    """Every record of every whole batch in ``buf``, in order."""
    for pos, _h in iter_batches(buf, validate_crc=verify_crc):
        yield from decode_batch(buf, pos, verify_crc=False)[1]


__all__ = [
    "ATTRIBUTES_OFFSET",
    "CODEC_NAMES",
    "CREATE_TIME",
    "GZIP",
    "LOG_APPEND_TIME",
    "LZ4",
    "NONE",
    "SNAPPY",
    "ZSTD",
    "Record",
    "build_batch",
    "compress",
    "decode_batch",
    "decompress",
    "iter_records",
]
