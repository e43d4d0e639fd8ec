"""One pass over the records of a v2 batch: are they well formed, and what are their timestamps?

``walk(records, count)`` reads the bytes after the batch header (decompressed) and answers
``(error, index, min_ts_delta, max_ts_delta, first_null_key)``: error is one of the WALK_* codes (0 when
all ``count`` records parse and end exactly at the end of the bytes), index the record it stopped at.
The C version (``_native/record_walk.c``, built when a compiler is present) and this Python one give
the same answers; the tests hold them to it. Record layout (Kafka's DefaultRecord): length varint,
attributes int8, timestampDelta varlong, offsetDelta varint, key and value (varint length, -1 = null),
header count varint, each header a key (varint length >= 0) and a value (varint length, -1 = null).
"""

from __future__ import annotations

from collections.abc import Callable

Buffer = bytes | bytearray | memoryview
WalkResult = tuple[int, int, int, int, int]

WALK_OK = 0
WALK_TRUNCATED = 1
WALK_BAD_VARINT = 2
WALK_BAD_LENGTH = 3
WALK_BAD_OFFSET = 4
WALK_SIZE_MISMATCH = 5
WALK_BAD_HEADERS = 6
WALK_TRAILING = 7

WALK_MESSAGES = {
    WALK_TRUNCATED: "the batch declares more records than it holds",
    WALK_BAD_VARINT: "a record length varint is malformed",
    WALK_BAD_LENGTH: "a record length is not positive",
    WALK_BAD_OFFSET: "record offset deltas are not 0..n-1 in order",
    WALK_SIZE_MISMATCH: "a record's fields do not end where its length says",
    WALK_BAD_HEADERS: "a record has a negative header count or header key length",
    WALK_TRAILING: "bytes remain after the records the batch declares",
}


class _Cut(Exception):
    pass


def _varint(buf: Buffer, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    v = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise _Cut
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return (v >> 1) ^ -(v & 1), pos
        shift += 7
    raise _Cut


def walk_py(buf: Buffer, count: int) -> WalkResult:
    end = len(buf)
    p = 0
    min_ts = max_ts = 0
    null_key = -1
    for i in range(count):
        if p >= end:
            return WALK_TRUNCATED, i, min_ts, max_ts, null_key
        try:
            length, p = _varint(buf, p, end, 5)
        except _Cut:
            return WALK_BAD_VARINT, i, min_ts, max_ts, null_key
        if length <= 0:
            return WALK_BAD_LENGTH, i, min_ts, max_ts, null_key
        if length > end - p:
            return WALK_TRUNCATED, i, min_ts, max_ts, null_key
        rec_end = p + length
        p += 1  # attributes: unused in v2
        try:
            ts, p = _varint(buf, p, rec_end, 10)
            off, p = _varint(buf, p, rec_end, 5)
            if off != i:
                return WALK_BAD_OFFSET, i, min_ts, max_ts, null_key
            klen, p = _varint(buf, p, rec_end, 5)
            if klen >= 0:
                if klen > rec_end - p:
                    raise _Cut
                p += klen
            elif null_key < 0:
                null_key = i
            vlen, p = _varint(buf, p, rec_end, 5)
            if vlen >= 0:
                if vlen > rec_end - p:
                    raise _Cut
                p += vlen
            nh, p = _varint(buf, p, rec_end, 5)
            if nh < 0:
                return WALK_BAD_HEADERS, i, min_ts, max_ts, null_key
            for _ in range(nh):
                hk, p = _varint(buf, p, rec_end, 5)
                if hk < 0:
                    return WALK_BAD_HEADERS, i, min_ts, max_ts, null_key
                if hk > rec_end - p:
                    raise _Cut
                p += hk
                hv, p = _varint(buf, p, rec_end, 5)
                if hv >= 0:
                    if hv > rec_end - p:
                        raise _Cut
                    p += hv
        except _Cut:
            return WALK_SIZE_MISMATCH, i, min_ts, max_ts, null_key
        if p != rec_end:
            return WALK_SIZE_MISMATCH, i, min_ts, max_ts, null_key
        if i == 0 or ts < min_ts:
            min_ts = ts
        if i == 0 or ts > max_ts:
            max_ts = ts
    if p != end:
        return WALK_TRAILING, count, min_ts, max_ts, null_key
    return WALK_OK, -1, min_ts, max_ts, null_key


def _native() -> Callable[[Buffer, int], WalkResult] | None:
    try:
        from epochlog.protocol._native import _record_walk  # type: ignore[attr-defined]
    except ImportError:
        return None
    return _record_walk.walk  # type: ignore[no-any-return]


walk_native = _native()
walk: Callable[[Buffer, int], WalkResult] = walk_native or walk_py


def walk_keys_and_timestamps(buf: Buffer, count: int) -> list[tuple[bool, int]]:
    """Each record's (has a key, timestamp delta), for naming the offending records once a walk found
    some (the slow path: only a refused batch takes it). The records were walked already."""
    out = []
    p = 0
    end = len(buf)
    for _ in range(count):
        length, p = _varint(buf, p, end, 5)
        rec_end = p + length
        ts, q = _varint(buf, p + 1, rec_end, 10)
        _off, q = _varint(buf, q, rec_end, 5)
        klen, _q = _varint(buf, q, rec_end, 5)
        out.append((klen >= 0, ts))
        p = rec_end
    return out
