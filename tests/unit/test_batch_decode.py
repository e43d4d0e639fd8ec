"""batch_decode: Fetch records to Arrow columns, checked against the project's own record decoder."""

from __future__ import annotations

import random
import struct

import crc32c
import pyarrow as pa
import pytest

from epochlog.protocol.record_batch import HEADER_SIZE, LOG_OVERHEAD, CorruptBatchError
from epochlog.protocol.records import (
    GZIP,
    LOG_APPEND_TIME,
    Record,
    build_batch,
    decode_batch,
    iter_records,
    write_varint,
)
from epochlog.spark.batch_decode import SCHEMA, SCHEMA_WITH_HEADERS, CorruptRecordsError, decode_fetch, varints
from epochlog.spark.reader import SCHEMA as READER_SCHEMA

BASE_TS = 1_700_000_000_000


def decode(data: bytes, start: int = 0, until: int = 1 << 62, headers: bool = False):
    return decode_fetch(data, topic="t", partition=3, start=start, until=until, include_headers=headers)


def expected_rows(data: bytes, start: int = 0, until: int = 1 << 62) -> list[tuple]:
    """What Kafka's consumer would report, from the project's record decoder."""
    rows = []
    pos = 0
    while pos < len(data):
        h, recs = decode_batch(data, pos)
        for r in recs:
            if start <= r.offset < until:
                rows.append((r.key, r.value, r.offset, r.timestamp, 1 if h.is_log_append_time else 0))
        pos += h.size
    return rows


def rows_of(batch: pa.RecordBatch) -> list[tuple]:
    cols = batch.to_pydict()
    assert set(cols["topic"]) == {"t"} and set(cols["partition"]) == {3}
    stamps = [int(ts.timestamp() * 1000) for ts in cols["timestamp"]]
    return list(zip(cols["key"], cols["value"], cols["offset"], stamps, cols["timestampType"], strict=True))


def batch_with_deltas(
    records: list[tuple[bytes | None, bytes | None, int]],
    deltas: list[int],
    *,
    base_offset: int,
    last_offset_delta: int,
    base_ts: int = BASE_TS,
    attributes: int = 0,
) -> bytes:
    """A v2 batch whose records carry the given offset deltas (compaction leaves gaps inside a batch)."""
    body = bytearray()
    for (key, value, ts_delta), delta in zip(records, deltas, strict=True):
        rec = bytearray(b"\x00")
        write_varint(rec, ts_delta)
        write_varint(rec, delta)
        for field in (key, value):
            if field is None:
                write_varint(rec, -1)
            else:
                write_varint(rec, len(field))
                rec += field
        write_varint(rec, 0)
        write_varint(body, len(rec))
        body += rec
    n = len(records)
    max_ts = base_ts + max((r[2] for r in records), default=0)
    tail = struct.pack(">hiqqqhii", attributes, last_offset_delta, base_ts, max_ts, -1, -1, -1, n)
    crc = crc32c.crc32c(tail + bytes(body))
    length = HEADER_SIZE - LOG_OVERHEAD + len(body)
    return struct.pack(">qiibI", base_offset, length, -1, 2, crc) + tail + bytes(body)


def test_schema_is_the_reader_schema() -> None:
    assert SCHEMA == READER_SCHEMA
    data = build_batch([(None, b"x")], base_timestamp=BASE_TS)
    assert decode(data).batch.schema == SCHEMA
    assert decode(data, headers=True).batch.schema == SCHEMA_WITH_HEADERS


def test_keys_values_nulls_and_multibyte_lengths() -> None:
    sizes = [0, 1, 63, 64, 100, 8191, 8192, 20_000]
    recs = []
    for i, size in enumerate(sizes):
        recs.append(Record(0, BASE_TS + i, None, bytes([i]) * size))
        recs.append(Record(0, BASE_TS + i, b"k" * size, b"v"))
        recs.append(Record(0, BASE_TS - 5000 * i, b"", None))  # negative timestamp delta, null value
    data = build_batch(recs, base_offset=40)
    d = decode(data)
    assert d.unsupported is None and d.next_offset == 40 + len(recs)
    assert rows_of(d.batch) == expected_rows(data)
    assert d.batch.column("value").null_count == len(sizes)
    assert d.batch.column("key").null_count == len(sizes)


@pytest.mark.parametrize("n", [1, 63, 64, 65, 8191, 8192, 8193, 20_000])
def test_fixed_size_records_across_delta_width_changes(n: int) -> None:
    # Offset deltas are 1, 2, 3 bytes long below 64, 8192, 2**20: record lengths change there.
    data = build_batch([(None, b"v" * 100)] * n, base_offset=7, base_timestamp=BASE_TS)
    d = decode(data)
    assert d.batch.num_rows == n and d.next_offset == 7 + n
    assert rows_of(d.batch) == expected_rows(data)


def test_timestamps_growing_past_varint_widths() -> None:
    # Timestamp deltas of 0..200_000 ms: one, two and three byte varints in one batch.
    recs = [Record(0, BASE_TS + 10 * i, None, b"v" * 100) for i in range(20_000)]
    data = build_batch(recs, base_offset=0)
    assert rows_of(decode(data).batch) == expected_rows(data)


def test_random_sizes_walk_record_by_record() -> None:
    rnd = random.Random(4)
    batches = []
    base = 0
    for _ in range(5):
        recs = []
        for _ in range(rnd.randint(1, 3000)):
            key = None if rnd.random() < 0.3 else bytes(rnd.randrange(256) for _ in range(rnd.choice([0, 3, 70])))
            value = None if rnd.random() < 0.05 else b"z" * rnd.choice([0, 1, 50, 63, 64, 130, 9000])
            recs.append(Record(0, BASE_TS + rnd.randint(-100_000, 100_000), key, value))
        batches.append(build_batch(recs, base_offset=base))
        base += len(recs) + rnd.randint(0, 5)  # gaps between batches
    data = b"".join(batches)
    d = decode(data)
    assert d.unsupported is None
    assert rows_of(d.batch) == expected_rows(data)
    last = decode_batch(batches[-1])[0]
    assert d.next_offset == last.next_offset


def test_gaps_inside_and_between_batches() -> None:
    # A compacted batch keeps its lastOffsetDelta; its records skip offsets.
    b1 = batch_with_deltas(
        [(b"a", b"1", 0), (None, b"2", -3), (b"c", b"", 7)], [0, 4, 9], base_offset=100, last_offset_delta=12
    )
    b2 = build_batch([(None, b"x" * 70)] * 3, base_offset=120, base_timestamp=BASE_TS)
    data = b1 + b2
    d = decode(data)
    assert [r[2] for r in rows_of(d.batch)] == [100, 104, 109, 120, 121, 122]
    assert rows_of(d.batch) == expected_rows(data)
    assert d.next_offset == 123


def test_start_and_until_cut_inside_batches() -> None:
    data = build_batch([(None, b"%d" % i) for i in range(100)], base_offset=1000, base_timestamp=BASE_TS)
    d = decode(data, start=1010, until=1050)
    assert [r[2] for r in rows_of(d.batch)] == list(range(1010, 1050))
    assert rows_of(d.batch) == expected_rows(data, 1010, 1050)
    assert d.next_offset == 1050
    # A batch wholly before the start is skipped.
    data2 = data + build_batch([(None, b"y")] * 5, base_offset=1100, base_timestamp=BASE_TS)
    d2 = decode(data2, start=1100)
    assert [r[2] for r in rows_of(d2.batch)] == list(range(1100, 1105))


def test_log_append_time_uses_max_timestamp() -> None:
    recs = [Record(0, BASE_TS + i, None, b"v") for i in range(5)]
    plain = build_batch(recs, base_offset=0)
    appended = bytearray(build_batch(recs, base_offset=5, timestamp_type=LOG_APPEND_TIME))
    data = plain + bytes(appended)
    rows = rows_of(decode(data).batch)
    assert rows == expected_rows(data)
    assert [r[4] for r in rows] == [0] * 5 + [1] * 5
    assert {r[3] for r in rows[5:]} == {BASE_TS + 4}


def test_stops_at_compressed_control_and_transactional_batches() -> None:
    plain = build_batch([(None, b"a")] * 3, base_offset=0, base_timestamp=BASE_TS)
    for kind, other in [
        ("compressed", build_batch([(None, b"b")] * 3, base_offset=3, compression=GZIP)),
        ("control", build_batch([(None, b"")], base_offset=3, is_control=True, producer_id=1, producer_epoch=0)),
        ("transactional", build_batch([(None, b"b")], base_offset=3, is_transactional=True, producer_id=1)),
    ]:
        d = decode(plain + other + plain)
        assert kind in (d.unsupported or "")
        assert d.next_offset == 3
        assert [r[2] for r in rows_of(d.batch)] == [0, 1, 2]
        first = decode(other + plain)
        assert first.batch is None and first.next_offset == 0 and first.unsupported


def test_partial_trailing_batch_is_left_for_the_next_fetch() -> None:
    b1 = build_batch([(None, b"a")] * 3, base_offset=0, base_timestamp=BASE_TS)
    b2 = build_batch([(None, b"b")] * 3, base_offset=3, base_timestamp=BASE_TS)
    d = decode(b1 + b2[:-1])
    assert d.unsupported is None and d.next_offset == 3 and d.batch.num_rows == 3
    assert decode(b2[:30]).batch is None


def test_corrupt_bytes_are_refused() -> None:
    data = bytearray(build_batch([(None, b"abc")] * 4, base_offset=0, base_timestamp=BASE_TS))
    data[-2] ^= 0xFF
    with pytest.raises(CorruptRecordsError, match="CRC"):
        decode(bytes(data))


def test_an_overlong_record_length_varint_is_refused() -> None:
    # A well-formed batch (length and CRC agree) whose one record starts with an 11-byte varint.
    body = b"\xff" * 11
    tail = struct.pack(">hiqqqhii", 0, 0, BASE_TS, BASE_TS, -1, -1, -1, 1)
    length = HEADER_SIZE - LOG_OVERHEAD + len(body)
    data = struct.pack(">qiibI", 0, length, -1, 2, crc32c.crc32c(tail + body)) + tail + body
    with pytest.raises(CorruptBatchError, match="varint longer than 10 bytes"):
        decode(data)


def test_headers_stop_decoding_only_when_asked_for() -> None:
    recs = [
        Record(0, BASE_TS, None, b"v0"),
        Record(0, BASE_TS, b"k", b"v1", [("h", b"x")]),
        Record(0, BASE_TS, None, b"v2"),
    ]
    data = build_batch(recs, base_offset=50)
    # Without includeHeaders the headers are skipped.
    d = decode(data)
    assert d.unsupported is None and [r[1] for r in rows_of(d.batch)] == [b"v0", b"v1", b"v2"]
    # With it, decoding stops at the first record with headers, which the general reader then reads.
    d = decode(data, headers=True)
    assert d.unsupported == "records with headers" and d.next_offset == 51
    assert d.batch.num_rows == 1 and d.batch.column("headers").to_pylist() == [[]]
    d = decode(data, start=51, headers=True)
    assert d.batch is None and d.next_offset == 51


def test_varints_match_the_scalar_decoder() -> None:
    numbers = [0, 1, -1, 63, -64, 64, 8191, -8192, 8192, 1 << 20, -(1 << 20), 1 << 40, -(1 << 62), (1 << 63) - 1]
    buf = bytearray()
    starts = []
    for n in numbers * 3:
        starts.append(len(buf))
        write_varint(buf, n)
    u8 = pa.array(list(buf), pa.uint8())
    for subset in (numbers[:2], numbers[:6], numbers[:9], numbers):
        k = len(subset)
        values, widths = varints(u8, pa.array(starts[:k], pa.int64()))
        assert values.to_pylist() == subset
        got = [widths.as_py()] * k if isinstance(widths, pa.Scalar) else widths.to_pylist()
        assert got == [starts[i + 1] - starts[i] for i in range(k)]


def test_against_iter_records_on_many_batches() -> None:
    data = b"".join(
        build_batch([(b"k%d" % i, b"v" * (i % 200))] * (i + 1), base_offset=sum(range(i + 1)), base_timestamp=BASE_TS)
        for i in range(40)
    )
    d = decode(data)
    recs = list(iter_records(data))
    assert d.batch.column("offset").to_pylist() == [r.offset for r in recs]
    assert d.batch.column("value").to_pylist() == [r.value for r in recs]
    assert d.batch.column("key").to_pylist() == [r.key for r in recs]
