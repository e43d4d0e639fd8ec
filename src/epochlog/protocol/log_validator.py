"""Produce-side validation of v2 record batches, with Kafka's LogValidator rules and error codes.

Run on the leader before an append touches the log, so a refused batch moves nothing (log end, HW,
epoch cache). Pure: bytes, the topic's settings and ``now`` in; an error or the batch (with its
maxTimestamp recomputed in place when the producer's was wrong) out.

Rules (Kafka's ProduceRequest.validateRecords, UnifiedLog.analyzeAndValidateRecords and LogValidator):
- exactly one batch per partition (Produce v3+), magic 2, base offset 0, CRC32C over 21..end;
- recordCount == lastOffsetDelta + 1 > 0; no control batch from a client; a producer id needs a sequence;
- every record parses to the batch's end with offset deltas 0..n-1 (compressed batches are decompressed,
  with a bound on the output);
- a compacted topic takes no record without a key;
- CreateTime timestamps within message.timestamp.before.max.ms / after.max.ms of ``now`` (-1 = none),
  and a producer may not claim LogAppendTime on a CreateTime topic;
- maxTimestamp is recomputed from the records, not trusted.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import cramjam
import crc32c

from epochlog.protocol.errors import Err
from epochlog.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    BatchHeader,
    CorruptBatchError,
    compute_crc,
    iter_batches,
)
from epochlog.protocol.record_walk import WALK_MESSAGES, WALK_OK, walk, walk_timestamps
from epochlog.protocol.records import GZIP, LZ4, NONE, SNAPPY, ZSTD

NO_TIMESTAMP = -1
MAX_TIMESTAMP_OFFSET = 35
_Q = struct.Struct(">q")
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
# Decompressed records may be this many times the batch limit (at least 64 MiB): far beyond what real
# producers compress (Kafka data compresses 2-10x), far below what a compression bomb would expand to.
DECOMPRESSION_RATIO_LIMIT = 64
DECOMPRESSION_FLOOR = 64 << 20


@dataclass(frozen=True)
class TopicRules:
    """The topic settings validation depends on."""

    compacted: bool = False
    log_append_time: bool = False
    timestamp_before_max_ms: int = 2**63 - 1
    timestamp_after_max_ms: int = 3_600_000
    max_message_bytes: int = 1_048_588

    @property
    def decompressed_limit(self) -> int:
        return max(DECOMPRESSION_FLOOR, DECOMPRESSION_RATIO_LIMIT * self.max_message_bytes)


@dataclass
class ValidationError(Exception):
    code: Err
    message: str
    record_errors: list[tuple[int, str]] = field(default_factory=list)

    def __str__(self) -> str:
        return self.message


Buffer = bytearray | memoryview | bytes


def validate_produce_batch(buf: Buffer, rules: TopicRules, now_ms: int) -> Buffer:
    """Validate the partition data of one Produce; raises ValidationError. Returns what to append: ``buf``
    itself, with its maxTimestamp (and CRC) corrected in place when the producer's was wrong, or a
    corrected copy when ``buf`` is read-only."""
    try:
        batches = list(iter_batches(buf, validate_crc=False))
    except CorruptBatchError as e:
        raise ValidationError(Err.CORRUPT_MESSAGE, str(e)) from None
    if len(batches) != 1:
        raise ValidationError(
            Err.INVALID_RECORD, f"Produce v3+ needs exactly one record batch per partition, got {len(batches)}"
        )
    pos, h = batches[0]
    if compute_crc(buf, pos, h) != h.crc:
        raise ValidationError(Err.CORRUPT_MESSAGE, f"record batch CRC32C mismatch (stored {h.crc:#010x})")
    _check_header(h)
    if not rules.log_append_time and h.is_log_append_time:
        raise ValidationError(
            Err.INVALID_TIMESTAMP, "the producer set LogAppendTime on a batch for a CreateTime topic"
        )
    records = _records(buf, pos, h, rules)
    err, index, min_delta, max_delta, null_key = walk(records, h.record_count)
    if err != WALK_OK:
        message = f"record {index} of the batch: {WALK_MESSAGES[err]}"
        raise ValidationError(Err.INVALID_RECORD, message, [(max(index, 0), WALK_MESSAGES[err])])
    if rules.compacted and null_key >= 0:
        raise ValidationError(
            Err.INVALID_RECORD,
            "a compacted topic cannot accept a record without a key",
            [(null_key, "compacted topic cannot accept a record without a key")],
        )
    if rules.log_append_time:
        return buf  # the log stamps maxTimestamp with its append time
    lo, hi = h.base_timestamp + min_delta, h.base_timestamp + max_delta
    earliest = now_ms - rules.timestamp_before_max_ms if rules.timestamp_before_max_ms < now_ms else -(2**63)
    latest = now_ms + rules.timestamp_after_max_ms
    if lo < earliest or hi > latest:
        bad = [
            (i, f"timestamp {ts} is out of the allowed range [{earliest}, {latest}]")
            for i, ts in enumerate(h.base_timestamp + d for d in walk_timestamps(records, h.record_count))
            if ts != NO_TIMESTAMP and not earliest <= ts <= latest
        ]
        if bad:
            raise ValidationError(Err.INVALID_TIMESTAMP, f"{len(bad)} record timestamps out of range", bad)
    if hi != h.max_timestamp:
        return _set_max_timestamp(buf, pos, h, hi)
    return buf


def _check_header(h: BatchHeader) -> None:
    if h.base_offset != 0:
        raise ValidationError(Err.INVALID_RECORD, f"a produced batch must have base offset 0, got {h.base_offset}")
    if h.record_count <= 0 or h.record_count != h.last_offset_delta + 1:
        raise ValidationError(
            Err.INVALID_RECORD,
            f"the batch declares {h.record_count} records but lastOffsetDelta {h.last_offset_delta}",
        )
    if h.is_control:
        raise ValidationError(Err.INVALID_RECORD, "clients may not produce control batches")
    if h.has_producer_id and h.base_sequence < 0:
        raise ValidationError(Err.INVALID_RECORD, "a batch with a producer id needs a base sequence >= 0")


def _records(buf: Buffer, pos: int, h: BatchHeader, rules: TopicRules) -> memoryview | bytes:
    body = memoryview(buf)[pos + HEADER_SIZE : pos + h.size]
    if h.compression == NONE:
        return body
    try:
        return _decompress_bounded(h.compression, bytes(body), rules.decompressed_limit)
    except ValidationError:
        raise
    except Exception as e:  # each codec raises its own error types on bad input
        raise ValidationError(Err.CORRUPT_MESSAGE, f"cannot decompress the records: {e}") from None


def _decompress_bounded(codec: int, data: bytes, limit: int) -> bytes:
    """Decompress into buffers that grow to at most ``limit`` bytes: a bomb is refused after doing at
    most about twice ``limit`` of work, never allocating more."""
    if codec == SNAPPY and data.startswith(_XERIAL_MAGIC):
        from epochlog.protocol.records import decompress

        if _xerial_size(data) > limit:
            raise _too_large(limit)
        return decompress(codec, data)
    into = {
        GZIP: cramjam.gzip.decompress_into,
        SNAPPY: cramjam.snappy.decompress_raw_into,
        LZ4: cramjam.lz4.decompress_into,
        ZSTD: cramjam.zstd.decompress_into,
    }.get(codec)
    if into is None:
        raise ValidationError(Err.CORRUPT_MESSAGE, f"unknown compression codec {codec}")
    size = min(limit, max(8 * len(data), 256 << 10))
    while True:
        out = bytearray(size)
        try:
            n = into(data, out)
            return bytes(memoryview(out)[:n])
        except Exception as e:
            if size >= limit or not _output_too_small(e):
                if size >= limit and _output_too_small(e):
                    raise _too_large(limit) from None
                raise
            size = min(limit, size * 4)


def _output_too_small(e: Exception) -> bool:
    text = str(e)
    return "whole buffer" in text or "smaller than required" in text


def _too_large(limit: int) -> ValidationError:
    return ValidationError(Err.INVALID_RECORD, f"the records decompress to more than {limit} bytes")


def _xerial_size(data: bytes) -> int:
    """Sum of the uncompressed lengths each xerial block's snappy preamble declares."""
    total, pos = 0, 16
    while pos + 4 <= len(data):
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        shift = v = 0
        for i in range(5):
            if pos + i >= len(data):
                break
            b = data[pos + i]
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
        total += v
        pos += max(n, 0)
    return total


def _set_max_timestamp(buf: Buffer, pos: int, h: BatchHeader, ts: int) -> Buffer:
    if isinstance(buf, bytes) or (isinstance(buf, memoryview) and buf.readonly):
        buf = bytearray(buf)
    _Q.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, ts)
    crc = crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + h.size])
    struct.pack_into(">I", buf, pos + CRC_OFFSET, crc)
    return buf
