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
- maxTimestamp is recomputed from the records, not trusted;
- KIP-467: a batch refused for its records' keys or timestamps names every bad record in record_errors.
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
from epochlog.protocol.record_walk import WALK_MESSAGES, WALK_OK, walk, walk_keys_and_timestamps
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
    if rules.log_append_time:
        if rules.compacted and null_key >= 0:
            _refuse_records(records, h, rules, now_ms)
        return buf  # the log stamps maxTimestamp with its append time
    lo, hi = h.base_timestamp + min_delta, h.base_timestamp + max_delta
    earliest, latest = _window(rules, now_ms)
    if (rules.compacted and null_key >= 0) or lo < earliest or hi > latest:
        _refuse_records(records, h, rules, now_ms)
    if hi != h.max_timestamp:
        return _set_max_timestamp(buf, pos, h, hi)
    return buf


def _window(rules: TopicRules, now_ms: int) -> tuple[int, int]:
    """The CreateTime timestamps a record may carry, Kafka's bounds (inclusive)."""
    earliest = now_ms - rules.timestamp_before_max_ms if rules.timestamp_before_max_ms < now_ms else -(2**63)
    return earliest, now_ms + rules.timestamp_after_max_ms


def _refuse_records(records: memoryview | bytes, h: BatchHeader, rules: TopicRules, now_ms: int) -> None:
    """KIP-467, as Kafka's LogValidator does it: every record is judged, a keyless record on a compacted
    topic by its key first, any other by its timestamp; the batch fails with INVALID_TIMESTAMP if any
    record's timestamp was out of range, INVALID_RECORD otherwise, and names each bad record so a client
    fails only those (librdkafka fails the rest with _INVALID_DIFFERENT_RECORD)."""
    earliest, latest = _window(rules, now_ms)
    errors: list[tuple[int, str]] = []
    bad_timestamp = False
    for i, (has_key, delta) in enumerate(walk_keys_and_timestamps(records, h.record_count)):
        ts = h.base_timestamp + delta
        if rules.compacted and not has_key:
            errors.append((i, "Compacted topic cannot accept message without key"))
        elif not rules.log_append_time and ts != NO_TIMESTAMP and not earliest <= ts <= latest:
            bad_timestamp = True
            message = f"Timestamp {ts} of message with offset {i} is out of range. "
            errors.append((i, message + f"The timestamp should be within [{earliest}, {latest}]"))
    if not errors:
        return
    if bad_timestamp:
        raise ValidationError(
            Err.INVALID_TIMESTAMP, "One or more records have been rejected due to invalid timestamp", errors
        )
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
    raise ValidationError(
        Err.INVALID_RECORD,
        f"One or more records have been rejected due to {len(errors)} record errors in total, "
        f"and only showing the first three errors at most: [{shown}]",
        errors,
    )


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
    declared = _declared_size(codec, data)
    if declared is not None and declared > limit:
        raise _too_large(limit)  # refused from the frame header alone: no work for a bomb that says so
    size = min(limit, declared + 64 if declared is not None else max(8 * len(data), 256 << 10))
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


def _declared_size(codec: int, data: bytes) -> int | None:
    """The decompressed size the compressed data announces, when its format carries one: a zstd frame's
    Frame_Content_Size, a gzip member's ISIZE (mod 2^32), a raw snappy block's length preamble. A lie
    only costs the growing-buffer path below."""
    try:
        if codec == ZSTD and data[:4] == b"\x28\xb5\x2f\xfd":
            fhd = data[4]
            single = (fhd >> 5) & 1
            fcs_size = (1 if single else 0, 2, 4, 8)[fhd >> 6]
            if not fcs_size:
                return None
            pos = 5 + (0 if single else 1) + (0, 1, 2, 4)[fhd & 3]
            value = int.from_bytes(data[pos : pos + fcs_size], "little")
            return value + 256 if fcs_size == 2 else value
        if codec == GZIP and len(data) >= 18:
            return int.from_bytes(data[-4:], "little")
        if codec == SNAPPY:
            v = shift = 0
            for b in data[:5]:
                v |= (b & 0x7F) << shift
                if not b & 0x80:
                    return v
                shift += 7
    except IndexError:
        return None
    return None


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
