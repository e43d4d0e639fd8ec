"""Decode the record batches of one Fetch answer into one Arrow record batch, column at a time.

Pure functions, no I/O. Only what the source needs most of the time is decoded here: magic-v2,
uncompressed, non-control, non-transactional batches whose records carry no headers (or whose headers
are not asked for). Decoding stops at the first batch it does not take and says why, so the caller can
read from there with a general client.

Record layout (Kafka's ``DefaultRecord``; all varints zigzag)::

    length | attributes int8 | timestampDelta | offsetDelta | keyLength | key | valueLength | value
    | headerCount | headers

The record *lengths* are walked one record after another (a record's start depends on the previous
length); when every record of a batch has the same encoded length, which one vectorized comparison
proves, there is no walk at all. Every other field is decoded for all records at once with
``pyarrow.compute`` over the positions of the records (varint widths included), and keys and values
are gathered into contiguous buffers by Arrow's ``take`` over a binary array whose offsets alternate
between "field" and "the bytes between two fields" of the response buffer.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c
import pyarrow as pa
import pyarrow.compute as pc

from epochlog.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    CorruptBatchError,
)
from epochlog.protocol.records import read_varint

# baseOffset q, batchLength i, partitionLeaderEpoch i, magic b, crc I, attributes h, lastOffsetDelta i,
# baseTimestamp q, maxTimestamp q, producerId q, producerEpoch h, baseSequence i, recordCount i
_HEADER = struct.Struct(">qiibIhiqqqhii")
_MAX_VARINT = 10
_I64 = pa.int64()
_TS_US = pa.timestamp("us", tz="UTC")


# pyarrow.compute converts plain Python numbers through a failed `import numpy` per call when numpy is not
# installed (~120 us each, measured); typed scalars skip that.
def _i64(x: int) -> pa.Scalar:
    return pa.scalar(x, _I64)


def _u8(x: int) -> pa.Scalar:
    return pa.scalar(x, pa.uint8())


_ZERO = _i64(0)
_ONE = _i64(1)
_MINUS_ONE = _i64(-1)
_U64_ONE = pa.scalar(1, pa.uint64())
_LOW7 = _u8(0x7F)
_HIGH = _u8(0x80)
_FALSE = pa.scalar(False)
_U8 = [_u8(i) for i in range(256)]

HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]
SCHEMA = pa.schema(BASE_FIELDS)
SCHEMA_WITH_HEADERS = pa.schema([*BASE_FIELDS, pa.field("headers", HEADERS_TYPE)])
_EMPTY_HEADERS = pa.array([], HEADERS_TYPE.value_type)


class CorruptRecordsError(CorruptBatchError):
    """Record bytes that do not add up (lengths past the batch, varints too long, a bad CRC)."""


@dataclass(frozen=True, slots=True)
class Decoded:
    """What one Fetch answer gave.

    ``batch`` holds the records in [start, until) of the batches decoded, in offset order (None if there
    are none). ``next_offset`` is the first offset not covered: the next fetch position. ``unsupported``
    is set when decoding stopped at a batch this module does not take (compressed, control,
    transactional, headers asked for): that batch starts at or after ``next_offset``.
    """

    batch: pa.RecordBatch | None
    next_offset: int
    unsupported: str | None = None


_ARANGE: list[pa.Array] = [pa.array([], _I64)]


def _arange(n: int, start: int = 0, step: int = 1) -> pa.Array:
    """[start, start + step, ...] of n int64: a slice of one cached 0, 1, 2, ... array, scaled."""
    base = _ARANGE[0]
    if len(base) < n:
        size = max(n, 2 * len(base), 1 << 16)
        base = _ARANGE[0] = pc.subtract(pc.cumulative_sum(pa.repeat(_ONE, size)), _ONE)
    out = base.slice(0, n)
    if step != 1:
        out = pc.multiply(out, _i64(step))
    return pc.add(out, _i64(start)) if start else out


def _zigzag(raw: int) -> int:
    return (raw >> 1) ^ -(raw & 1)


def _tables() -> tuple[pa.Array, pa.Array, pa.Array, pa.Array]:
    """Varints by lookup. One byte: the value. Two bytes, index b0 | b1 << 8: the value, the width (3 when
    the varint goes on) and the raw 14 bits (to continue with a third byte)."""
    values: list[int] = []
    widths: list[int] = []
    raws: list[int] = []
    for b1 in range(256):
        for b0 in range(256):
            raw = (b0 & 0x7F) | ((b1 & 0x7F) << 7)
            if b0 < 0x80:
                values.append(_zigzag(b0))
                widths.append(1)
            elif b1 < 0x80:
                values.append(_zigzag(raw))
                widths.append(2)
            else:
                values.append(0)
                widths.append(3)
            raws.append(raw)
    one_byte = pa.array([_zigzag(b) for b in range(128)], _I64)
    return one_byte, pa.array(values, _I64), pa.array(widths, _I64), pa.array(raws, _I64)


_ONE_BYTE, _TWO_BYTE_VALUES, _TWO_BYTE_WIDTHS, _TWO_BYTE_RAW = _tables()
_U16 = pa.uint16()
_EIGHT = pa.scalar(8, _U16)
_U8_MAX1 = 0x7F
_THREE = _i64(3)
_FOURTEEN = _i64(14)


def varints(u8: pa.Array, pos: pa.Array) -> tuple[pa.Array, pa.Array | pa.Scalar]:
    """Zigzag varints starting at each of ``pos`` (int64) in the byte array ``u8``: (values, widths), int64.

    Up to two bytes (the usual lengths and deltas) are table lookups, a third byte a few more passes,
    longer ones one pass per byte. Bytes past the end of ``u8`` read as its last byte (callers check that
    fields end inside their record). The widths are a scalar when they are all 1.
    """
    b0 = pc.take(u8, pos)
    if pc.max(b0).as_py() <= _U8_MAX1:
        return pc.take(_ONE_BYTE, b0), _ONE
    last = _i64(len(u8) - 1)
    b1 = pc.take(u8, pc.min_element_wise(pc.add(pos, _ONE), last))
    idx = pc.bit_wise_or(pc.cast(b0, _U16), pc.shift_left(pc.cast(b1, _U16), _EIGHT))
    width = pc.take(_TWO_BYTE_WIDTHS, idx)
    if pc.max(width).as_py() <= 2:
        return pc.take(_TWO_BYTE_VALUES, idx), width
    more = pc.equal(width, _THREE)
    b2 = pc.take(u8, pc.min_element_wise(pc.add(pos, _i64(2)), last))
    if pc.any(pc.and_(more, pc.greater_equal(b2, _HIGH))).as_py():
        return _long_varints(u8, pos, b0, last)
    third = pc.shift_left(pc.cast(b2, _I64), _FOURTEEN)
    raw = pc.add(pc.take(_TWO_BYTE_RAW, idx), pc.if_else(more, third, _ZERO))
    zz = pc.bit_wise_xor(pc.shift_right(raw, _ONE), pc.negate(pc.bit_wise_and(raw, _ONE)))
    return pc.if_else(more, zz, pc.take(_TWO_BYTE_VALUES, idx)), width


def _long_varints(u8: pa.Array, pos: pa.Array, b: pa.Array, last: pa.Scalar) -> tuple[pa.Array, pa.Array]:
    raw = pc.cast(pc.bit_wise_and(b, _LOW7), pa.uint64())
    active = pc.greater_equal(b, _HIGH)
    width = pa.repeat(_ONE, len(pos))
    k = 1
    while pc.any(active).as_py():
        if k >= _MAX_VARINT:
            raise CorruptRecordsError("varint longer than 10 bytes")
        bk = pc.take(u8, pc.min_element_wise(pc.add(pos, _i64(k)), last))
        part = pc.shift_left(pc.cast(pc.bit_wise_and(bk, _LOW7), pa.uint64()), pa.scalar(7 * k, pa.uint64()))
        raw = pc.if_else(active, pc.bit_wise_or(raw, part), raw)
        width = pc.add(width, pc.cast(active, _I64))
        active = pc.and_(active, pc.greater_equal(bk, _HIGH))
        k += 1
    half = pc.cast(pc.shift_right(raw, _U64_ONE), _I64)
    sign = pc.negate(pc.cast(pc.bit_wise_and(raw, _U64_ONE), _I64))
    return pc.bit_wise_xor(half, sign), width


def _walk_python(data: bytes, p: int, end: int, count: int, bodies: list[int], ends: list[int]) -> int:
    """Walk ``count`` record lengths from ``p``, appending body starts and ends; returns the position after."""
    for _ in range(count):
        b = data[p] if p < end else 0x80
        if b < 0x80:
            n = (b >> 1) ^ -(b & 1)
            q = p + 1
        else:
            n, q = read_varint(data, p, end)
        p = q + n
        if n < 1 or p > end:
            raise CorruptRecordsError(f"record of {n} bytes runs past its batch")
        bodies.append(q)
        ends.append(p)
    return p


# Offset deltas are one byte below 64, two below 8192, three below 2**20: where record lengths change.
_WALK_FIRST = 64
_DELTA_WIDTH_CHANGES = (8192, 1 << 20, 1 << 31)


def record_bodies(
    data: bytes, u8: pa.Array, start: int, end: int, count: int, bodies: list[pa.Array], ends: list[pa.Array]
) -> None:
    """Append (body start, body end) int64 arrays for the records of one batch; body = after the length varint.

    The first records are walked in Python (a few dozen cost less than one vectorized probe). The rest is
    found in runs of equal encoded length: from a record of length L at p, the records at p + i * stride
    are checked at once (their length varints must have the same bytes as the first one); the first that
    differs starts the next run. Fixed-size values give one or two runs per batch. When runs stay short
    the rest is walked in Python.
    """
    if count <= 0:
        if start != end:
            raise CorruptRecordsError("bytes after the last record of a batch")
        return
    head_bodies: list[int] = []
    head_ends: list[int] = []
    p = _walk_python(data, start, end, min(count, _WALK_FIRST), head_bodies, head_ends)
    bodies.append(pa.array(head_bodies, _I64))
    ends.append(pa.array(head_ends, _I64))
    done = len(head_bodies)
    window = count
    short = 0
    while done < count:
        if short >= 8:
            tail_bodies: list[int] = []
            tail_ends: list[int] = []
            p = _walk_python(data, p, end, count - done, tail_bodies, tail_ends)
            bodies.append(pa.array(tail_bodies, _I64))
            ends.append(pa.array(tail_ends, _I64))
            break
        length, body = read_varint(data, p, end)
        width = body - p
        stride = width + length
        if length < 1 or p + stride > end:
            raise CorruptRecordsError(f"record of {length} bytes runs past its batch")
        boundary = next(c for c in _DELTA_WIDTH_CHANGES if c > done)
        m = min(count - done, (end - p) // stride, window, boundary - done)
        k = 1
        if m > 1:
            at = _arange(m, p, stride)
            same = pc.equal(pc.take(u8, at), _U8[data[p]])
            for j in range(1, width):
                same = pc.and_(same, pc.equal(pc.take(u8, pc.add(at, _i64(j))), _U8[data[p + j]]))
            k = pc.index(same, _FALSE).as_py()
            if k < 0:
                k = m
        b = _arange(k, p + width, stride)
        bodies.append(b)
        ends.append(pc.add(b, _i64(length)))
        p += k * stride
        done += k
        if k < 16:
            short += 1
            window = 256
        else:
            short = 0
            window = count
    if p != end:
        raise CorruptRecordsError("record lengths do not add up to the batch length")


def _length_range(lengths: pa.Array) -> tuple[int, int]:
    lo_hi = pc.min_max(lengths).as_py()
    if lo_hi["min"] < -1:
        raise CorruptRecordsError("negative key or value length")
    return lo_hi["min"], lo_hi["max"]


def _skip(starts: pa.Array, lengths: pa.Array, length_range: tuple[int, int]) -> pa.Array:
    """starts + max(lengths, 0): the position after each key or value (null is -1, no bytes)."""
    lo, hi = length_range
    if hi <= 0:
        return starts
    if lo == hi:
        return pc.add(starts, _i64(hi))
    return pc.add(starts, pc.max_element_wise(lengths, _ZERO))


def _gather(buf: pa.Buffer, starts: pa.Array, lengths: pa.Array, length_range: tuple[int, int]) -> pa.Array:
    """The byte ranges [start, start + max(length, 0)) of ``buf`` as one binary array; length -1 is null.

    The ranges are increasing and do not overlap, so a binary array whose offsets alternate range start,
    range end, next range start... views ``buf`` without copying; taking its even elements copies just the
    ranges into one contiguous buffer.
    """
    n = len(starts)
    lo, hi = length_range  # of these lengths or of a longer array they start (still bounds them)
    if hi == -1:
        return pa.nulls(n, pa.binary())
    if lo == hi:
        # One length for all (fixed-size values): view start[i]..start[i+1] and cut each to that length.
        size = hi
        tail = pa.array([starts[n - 1].as_py() + size], pa.int32())
        offsets = pa.concat_arrays([pc.cast(starts, pa.int32()), tail])
        view = pa.Array.from_buffers(pa.binary(), n, [None, offsets.buffers()[1], buf])
        return pc.binary_slice(view, 0, size)
    nulls = pc.equal(lengths, _MINUS_ONE)
    null_count = pc.sum(pc.cast(nulls, _I64)).as_py() or 0
    ends = pc.add(starts, pc.max_element_wise(lengths, _ZERO))
    both = pa.concat_arrays([pc.cast(starts, pa.int32()), pc.cast(ends, pa.int32())])
    idx = _arange(2 * n)
    perm = pc.add(pc.shift_right(idx, _ONE), pc.multiply(pc.bit_wise_and(idx, _ONE), _i64(n)))
    offsets = pa.concat_arrays([pc.take(both, perm), pc.cast(ends, pa.int32())[n - 1 :]])
    view = pa.Array.from_buffers(pa.binary(), 2 * n, [None, offsets.buffers()[1], buf])
    out = pc.take(view, _arange(n, 0, 2))
    if null_count:
        valid = pc.invert(nulls)
        out = pa.Array.from_buffers(
            pa.binary(), n, [valid.buffers()[1], out.buffers()[1], out.buffers()[2]], null_count=null_count
        )
    return out


def _batch_problem(attributes: int, magic: int) -> str | None:
    if magic != MAGIC_V2:
        return f"record batch magic {magic}"
    if attributes & COMPRESSION_MASK:
        return f"compressed batch (codec {attributes & COMPRESSION_MASK})"
    if attributes & CONTROL_MASK:
        return "control batch"
    if attributes & TRANSACTIONAL_MASK:
        return "transactional batch"
    return None


def decode_fetch(
    data: bytes,
    *,
    topic: str,
    partition: int,
    start: int,
    until: int,
    include_headers: bool = False,
    verify_crc: bool = True,
) -> Decoded:
    """Decode the batches in ``data`` (a Fetch answer's records) into one Arrow batch of offsets [start, until).

    Stops at a partial trailing batch (the next fetch starts there) and at the first batch it does not
    take (``Decoded.unsupported``). Raises CorruptRecordsError for bytes that cannot be a record batch.
    """
    size = len(data)
    pos = 0
    next_offset = start
    unsupported: str | None = None
    bodies: list[pa.Array] = []
    ends: list[pa.Array] = []
    base_offsets: list[pa.Array] = []
    base_stamps: list[pa.Array] = []
    types: list[pa.Array] = []
    log_append: list[tuple[int, int, int]] = []  # (first record index, count, maxTimestamp)
    total = 0
    u8 = pa.Array.from_buffers(pa.uint8(), size, [None, pa.py_buffer(data)])
    while pos + HEADER_SIZE <= size and next_offset < until:
        (base, length, _epoch, magic, crc, attrs, last_delta, base_ts, max_ts, _pid, _pe, _seq, count) = (
            _HEADER.unpack_from(data, pos)
        )
        batch_end = pos + LOG_OVERHEAD + length
        if length < HEADER_SIZE - LOG_OVERHEAD:
            raise CorruptRecordsError(f"batch length {length} below the header size at base offset {base}")
        if batch_end > size:
            break  # a partial batch at the end of the answer
        batch_next = base + last_delta + 1
        if batch_next <= next_offset:
            pos = batch_end  # wholly before the start (a fetch answers from the batch holding the offset)
            continue
        unsupported = _batch_problem(attrs, magic)
        if unsupported is not None:
            break
        if verify_crc and crc32c.crc32c(memoryview(data)[pos + ATTRIBUTES_OFFSET : batch_end]) != crc:
            raise CorruptRecordsError(f"CRC32C mismatch in the batch at base offset {base}")
        record_bodies(data, u8, pos + HEADER_SIZE, batch_end, count, bodies, ends)
        if count:
            base_offsets.append(pa.repeat(pa.scalar(base, _I64), count))
            base_stamps.append(pa.repeat(pa.scalar(base_ts, _I64), count))
            is_append = bool(attrs & TIMESTAMP_TYPE_MASK)
            types.append(pa.repeat(pa.scalar(1 if is_append else 0, pa.int32()), count))
            if is_append:
                log_append.append((total, count, max_ts))
            total += count
        next_offset = batch_next
        pos = batch_end
    next_offset = min(next_offset, until)
    if total == 0:
        return Decoded(None, next_offset, unsupported)

    body = pa.concat_arrays(bodies) if len(bodies) > 1 else bodies[0]
    end = pa.concat_arrays(ends) if len(ends) > 1 else ends[0]
    # body: attributes int8, then the varints.
    after_attributes = pc.add(body, _ONE)
    ts_delta, w1 = varints(u8, after_attributes)
    p = pc.add(after_attributes, w1)
    off_delta, w2 = varints(u8, p)
    p = pc.add(p, w2)
    key_len, w3 = varints(u8, p)
    key_start = pc.add(p, w3)
    key_range = _length_range(key_len)
    p = _skip(key_start, key_len, key_range)
    value_len, w4 = varints(u8, p)
    value_start = pc.add(p, w4)
    value_range = _length_range(value_len)
    p = _skip(value_start, value_len, value_range)
    # The header count follows the value; no headers is the single byte 0 that ends the record.
    if not pc.all(pc.less(p, end)).as_py():
        raise CorruptRecordsError("record fields run past the record length")
    base_offset = pa.concat_arrays(base_offsets) if len(base_offsets) > 1 else base_offsets[0]
    offsets = pc.add(base_offset, off_delta)
    n = total
    no_headers = pc.and_(pc.equal(pc.take(u8, p), _U8[0]), pc.equal(pc.add(p, _ONE), end)) if include_headers else None
    if no_headers is not None and not pc.all(no_headers).as_py():
        # Keep the records before the first one with headers; the caller reads on from that one.
        n = pc.index(no_headers, _FALSE).as_py()
        at = offsets[n].as_py()
        next_offset = max(start, min(next_offset, at))
        unsupported = "records with headers"
        if n == 0:
            return Decoded(None, next_offset, unsupported)

    stamps = pc.add(pa.concat_arrays(base_stamps) if len(base_stamps) > 1 else base_stamps[0], ts_delta)
    if log_append:
        # LogAppendTime: every record of the batch carries the batch's maxTimestamp.
        chunks = []
        done = 0
        for first, count, max_ts in log_append:
            chunks.append(stamps.slice(done, first - done))
            chunks.append(pa.repeat(pa.scalar(max_ts, _I64), count))
            done = first + count
        chunks.append(stamps.slice(done))
        stamps = pa.concat_arrays(chunks)
    buf = u8.buffers()[1]
    cols = [
        _gather(buf, key_start.slice(0, n), key_len.slice(0, n), key_range),
        _gather(buf, value_start.slice(0, n), value_len.slice(0, n), value_range),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        offsets.slice(0, n),
        pc.multiply(stamps.slice(0, n), _i64(1000)).cast(_TS_US),
        (pa.concat_arrays(types) if len(types) > 1 else types[0]).slice(0, n),
    ]
    if include_headers:
        cols.append(pa.ListArray.from_arrays(pa.repeat(pa.scalar(0, pa.int32()), n + 1), _EMPTY_HEADERS, HEADERS_TYPE))
        batch = pa.RecordBatch.from_arrays(cols, schema=SCHEMA_WITH_HEADERS)
    else:
        batch = pa.RecordBatch.from_arrays(cols, schema=SCHEMA)
    first_offset = cols[4][0].as_py()
    last_offset = cols[4][n - 1].as_py()
    if first_offset < start or last_offset >= until:
        batch = batch.filter(pc.and_(pc.greater_equal(cols[4], _i64(start)), pc.less(cols[4], _i64(until))))
    return Decoded(batch if batch.num_rows else None, next_offset, unsupported)
