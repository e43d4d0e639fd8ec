"""Keys out of v2 record batches, and batches rebuilt without the records compaction removes.

The cleaner touches every record twice (once to learn each key's latest offset, once to decide what
stays), so these loops are the cleaner's cost. They read the record bytes in place: a record's length
varint gives its end, and only the fields before the key are decoded (timestamp and offset deltas, the
key length); the value's length is read only to tell a tombstone from a value. Varints of one byte, by
far the common case for these fields, take a fast path with no function call.

A kept record's bytes are copied as they are: its offset and timestamp deltas stay valid because the
rebuilt batch keeps the original base offset, last offset delta and base timestamp (Kafka's
``MemoryRecords.filterTo`` keeps the batch's offset range the same way). Only a batch that gets a delete
horizon (KIP-534: tombstones are kept until ``delete.retention.ms`` after the first cleaning that saw
them, the time written into the batch's base timestamp with attribute bit 0x40) has its records'
timestamp deltas re-encoded.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import crc32c

from epochlog.protocol.record_batch import (
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptBatchError,
)
from epochlog.protocol.records import compress, decompress, read_varint, write_varint

# Kafka's DefaultRecordBatch: the batch's base timestamp holds the delete horizon when this bit is set.
DELETE_HORIZON_MASK = 0x40
COMPRESSION_MASK = 0x07

_HEAD = struct.Struct(">qiibI")  # baseOffset, batchLength, partitionLeaderEpoch, magic, crc
_TAIL = struct.Struct(">hiqqqhii")  # attributes .. recordCount (what the CRC covers, before the records)


def has_delete_horizon(h: BatchHeader) -> bool:
    return bool(h.attributes & DELETE_HORIZON_MASK)


def records_of(batch: bytes | memoryview, h: BatchHeader) -> bytes:
    """The batch's record bytes, decompressed."""
    return decompress(h.compression, bytes(batch[HEADER_SIZE : h.size]))


def _load_native() -> Any:
    try:
        from epochlog.storage.cleaner._native import _cleaner_scan  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _cleaner_scan


# The C scans (storage/cleaner/_native/cleaner_scan.c) when built; the Python below otherwise. Tests
# switch this to compare the two.
native: Any = _load_native()


def map_keys(data: bytes, h: BatchHeader, offsets: dict[bytes, int]) -> None:
    """Record each keyed record's offset under its key (later records overwrite earlier ones)."""
    if native is not None:
        try:
            native.map_keys(data, h.record_count, h.base_offset, offsets)
        except ValueError as e:
            raise CorruptBatchError(f"batch at offset {h.base_offset}: {e}") from None
        return
    map_keys_py(data, h, offsets)


def _heads(data: bytes, count: int, base: int) -> Iterator[tuple[int, int, int, int, int, int]]:
    """Per record: (start, end, position after its length varint, offset, key position, key length; -1 for
    no key). Raises CorruptBatchError when a record overruns the batch."""
    p = 0
    n = len(data)
    try:
        for _ in range(count):
            start = p
            b = data[p]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                p += 1
            else:
                length, p = read_varint(data, p)
            end = p + length
            if length <= 0 or end > n:
                raise CorruptBatchError(f"record of {length} bytes overruns the batch at offset {base}")
            q = p + 1  # record attributes
            while data[q] & 0x80:  # timestamp delta: skipped
                q += 1
            q += 1
            b = data[q]
            if b < 0x80:
                delta = (b >> 1) ^ -(b & 1)
                q += 1
            else:
                delta, q = read_varint(data, q)
            b = data[q]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                q += 1
            else:
                klen, q = read_varint(data, q)
            yield start, end, p, base + delta, q, klen
            p = end
    except IndexError:
        raise CorruptBatchError(f"records overrun the batch at offset {base}") from None


def map_keys_py(data: bytes, h: BatchHeader, offsets: dict[bytes, int]) -> None:
    for _start, _end, _after, offset, q, klen in _heads(data, h.record_count, h.base_offset):
        if klen >= 0:
            offsets[data[q : q + klen]] = offset


@dataclass(slots=True)
class Filtered:
    """What is left of one batch: ``data`` the batch to write (None: drop it whole)."""

    data: bytes | memoryview | None
    records_in: int
    records_kept: int
    tombstones_kept: int
    # The delete horizon the kept batch carries (-1: none), so the cleaner knows when to come back.
    delete_horizon_ms: int = -1


def _rebuild(
    h: BatchHeader,
    body: bytes,
    count: int,
    attributes: int,
    base_timestamp: int,
) -> bytes:
    payload = compress(attributes & COMPRESSION_MASK, body) if count else b""
    if not count:
        attributes &= ~COMPRESSION_MASK  # an empty batch has nothing to compress (Kafka's empty header)
    tail = _TAIL.pack(
        attributes,
        h.last_offset_delta,
        base_timestamp,
        h.max_timestamp,
        h.producer_id,
        h.producer_epoch,
        h.base_sequence,
        count,
    )
    crc = crc32c.crc32c(tail + payload)
    length = HEADER_SIZE - LOG_OVERHEAD + len(payload)
    return _HEAD.pack(h.base_offset, length, h.partition_leader_epoch, 2, crc) + tail + payload


def _with_new_base_timestamp(body: bytes, spans: list[tuple[int, int, int]], shift: int) -> bytes:
    """Re-encode the kept records with their timestamp deltas moved by ``shift`` (base timestamp change)."""
    out = bytearray()
    rec = bytearray()
    for _start, end, after_len in spans:
        q = after_len + 1  # past the attributes byte
        ts_delta, q2 = read_varint(body, q)
        rec.clear()
        rec.append(body[after_len])
        write_varint(rec, ts_delta + shift)
        rec += body[q2:end]
        write_varint(out, len(rec))
        out += rec
    return bytes(out)


def filter_batch(
    batch: bytes | memoryview,
    h: BatchHeader,
    offsets: dict[bytes, int],
    map_end: int,
    now_ms: int,
    delete_retention_ms: int,
    retain_empty: bool,
) -> Filtered:
    """Kafka's cleaner rules for one batch: a keyed record stays when no later record of its key is in
    ``offsets`` (the map covers offsets below ``map_end``; records at or past it all stay); a tombstone
    stays until its batch's delete horizon has passed; a record without a key goes. A committed
    transaction's batch is filtered like any other; aborted data and markers are the caller's (see
    cleaner/transactions.py), and a control batch given here is kept whole.
    ``retain_empty``: keep the batch's header even when no record is left (the last batch of an active
    producer, or of the cleaning round).
    """
    n_in = h.record_count
    if h.attributes & CONTROL_MASK or h.base_offset >= map_end:
        return Filtered(batch, n_in, n_in, 0, h.base_timestamp if has_delete_horizon(h) else -1)
    data = records_of(batch, h)
    horizon = h.base_timestamp if has_delete_horizon(h) else -1
    drop_tombstones = horizon >= 0 and now_ms >= horizon
    if native is not None:
        try:
            body, kept, tombstones = native.filter_records(data, n_in, h.base_offset, offsets, map_end, drop_tombstones)
        except ValueError as e:
            raise CorruptBatchError(f"batch at offset {h.base_offset}: {e}") from None
        if not (tombstones and horizon < 0):  # a batch that gets a horizon is rebuilt below, in Python
            if body is None:
                return Filtered(batch, n_in, n_in, tombstones, horizon)
            if kept == 0 and not retain_empty:
                return Filtered(None, n_in, 0, 0)
            rebuilt = _rebuild(h, body, kept, h.attributes, h.base_timestamp)
            return Filtered(rebuilt, n_in, kept, tombstones, horizon if kept else -1)
    spans: list[tuple[int, int, int]] = []  # (record start, record end, position after the length varint)
    kept_tombstones = 0
    get = offsets.get
    for start, end, after_len, offset, q, klen in _heads(data, n_in, h.base_offset):
        if klen < 0:
            continue  # no key: a compacted topic cannot keep it (Kafka counts it invalid and drops it)
        if offset < map_end and offset < get(data[q : q + klen], -1):
            continue
        if q + klen >= len(data):
            raise CorruptBatchError(f"records overrun the batch at offset {h.base_offset}")
        if data[q + klen] == 1:  # zigzag(-1): a null value, a tombstone
            if drop_tombstones:
                continue
            kept_tombstones += 1
        spans.append((start, end, after_len))
    kept = len(spans)
    needs_horizon = kept_tombstones > 0 and horizon < 0
    if kept == n_in and not needs_horizon:
        return Filtered(batch, n_in, kept, kept_tombstones, horizon)
    if kept == 0 and not retain_empty:
        return Filtered(None, n_in, 0, 0)
    attributes = h.attributes
    base_ts = h.base_timestamp
    if kept == n_in:
        body = data
    else:
        body = b"".join(data[start:stop] for start, stop, _a in spans)
        if needs_horizon:
            # spans must point into ``body`` for the re-encoding below
            shifted = []
            pos = 0
            for start, stop, after in spans:
                shifted.append((pos, pos + stop - start, pos + after - start))
                pos += stop - start
            spans = shifted
    if needs_horizon:
        horizon = now_ms + delete_retention_ms
        body = _with_new_base_timestamp(body, spans, base_ts - horizon)
        attributes |= DELETE_HORIZON_MASK
        base_ts = horizon
    if kept == 0:
        horizon = -1
    return Filtered(_rebuild(h, body, kept, attributes, base_ts), n_in, kept, kept_tombstones, horizon)


def empty_of(h: BatchHeader) -> bytes:
    """The batch's header with no records: what stays of a removed batch whose producer state must
    survive (Kafka's RETAIN_EMPTY)."""
    return _rebuild(h, b"", 0, h.attributes, h.base_timestamp)


def with_delete_horizon(batch: bytes | memoryview, h: BatchHeader, horizon_ms: int) -> bytes:
    """The batch with its delete horizon set (KIP-534: base timestamp = the horizon, attribute bit 0x40),
    its records' timestamp deltas moved so each record keeps its own timestamp. Markers get one when
    their transaction has no data left, as tombstones do."""
    data = records_of(batch, h)
    spans = [(start, end, after) for start, end, after, _o, _q, _k in _heads(data, h.record_count, h.base_offset)]
    body = _with_new_base_timestamp(data, spans, h.base_timestamp - horizon_ms)
    return _rebuild(h, body, h.record_count, h.attributes | DELETE_HORIZON_MASK, horizon_ms)
