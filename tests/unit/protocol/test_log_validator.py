"""Produce validation (Kafka's LogValidator rules): each refusal with Kafka's code, and the walker's two
implementations (C and Python) held to the same answers."""

from __future__ import annotations

import struct
import time

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochlog.protocol.errors import Err
from epochlog.protocol.log_validator import TopicRules, ValidationError, validate_produce_batch
from epochlog.protocol.record_batch import HEADER_SIZE, read_header
from epochlog.protocol.record_walk import WALK_OK, walk_native, walk_py
from epochlog.protocol.records import GZIP, LZ4, NONE, SNAPPY, ZSTD, Record, build_batch, compress, write_varint

NOW = 1_795_000_000_000
DEFAULT_RULES = TopicRules()


def _recrc(buf: bytearray) -> bytearray:
    struct.pack_into(">I", buf, 17, crc32c.crc32c(memoryview(buf)[21:]))
    return buf


def _patch(batch: bytes, **fields: int) -> bytearray:
    """Rewrite header fields (offsets per the v2 layout) and fix the CRC, as a careful attacker would."""
    layout = {"base_offset": (0, ">q"), "last_offset_delta": (23, ">i"), "max_timestamp": (35, ">q"),
              "record_count": (57, ">i"), "attributes": (21, ">h"), "base_sequence": (53, ">i"),
              "producer_id": (43, ">q")}  # fmt: skip
    buf = bytearray(batch)
    for name, value in fields.items():
        pos, fmt = layout[name]
        struct.pack_into(fmt, buf, pos, value)
    return _recrc(buf)


def _raw_batch(body: bytes, count: int, base_ts: int = NOW) -> bytearray:
    """A batch around hand-made record bytes, with a correct CRC."""
    tail = struct.pack(">hiqqqhii", 0, count - 1, base_ts, base_ts, -1, -1, -1, count)
    length = HEADER_SIZE - 12 + len(body)
    return _recrc(bytearray(struct.pack(">qiibI", 0, length, -1, 2, 0) + tail + body))


def _check(buf: bytes | bytearray, rules: TopicRules = DEFAULT_RULES, now: int = NOW) -> bytes | bytearray | memoryview:
    return validate_produce_batch(buf, rules, now)


def _refused(buf: bytes | bytearray, rules: TopicRules = DEFAULT_RULES, now: int = NOW) -> ValidationError:
    with pytest.raises(ValidationError) as e:
        _check(buf, rules, now)
    return e.value


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_real_batches_pass(codec: int) -> None:
    recs = [Record(i, NOW + i, b"k%d" % i, b"v" * 100, [("h", b"x")]) for i in range(50)]
    assert _check(build_batch(recs, compression=codec)) is not None


def test_garbage_with_a_valid_crc_and_a_million_offsets_is_refused() -> None:
    """The issue's batch: a correct CRC, lastOffsetDelta 1,000,000, records that are not records."""
    body = bytes(range(256)) * 4
    e = _refused(_raw_batch(body, 1_000_001))
    assert e.code == Err.INVALID_RECORD and e.record_errors


def test_a_batch_claiming_more_records_than_it_holds() -> None:
    real = build_batch([(None, b"a"), (None, b"b")], base_timestamp=NOW)
    e = _refused(_patch(real, last_offset_delta=4, record_count=5))
    assert e.code == Err.INVALID_RECORD and "more records than it holds" in e.message
    e = _refused(_patch(real, record_count=3))  # count and lastOffsetDelta disagree
    assert e.code == Err.INVALID_RECORD


def test_negative_record_length_and_wrong_offset_deltas() -> None:
    body = bytearray()
    write_varint(body, -5)
    assert _refused(_raw_batch(bytes(body) + b"\x00" * 8, 1)).code == Err.INVALID_RECORD
    one = build_batch([(None, b"x")], base_timestamp=NOW)[HEADER_SIZE:]
    two = bytes(one) + bytes(one)  # two records, both with offset delta 0
    e = _refused(_raw_batch(two, 2))
    assert e.code == Err.INVALID_RECORD and e.record_errors[0][0] == 1


def test_trailing_bytes_and_header_count_mismatch() -> None:
    one = build_batch([(None, b"x")], base_timestamp=NOW)[HEADER_SIZE:]
    assert _refused(_raw_batch(bytes(one) + b"\x00", 1)).code == Err.INVALID_RECORD
    # A record whose length says one byte more than its fields take.
    r = bytearray(one)
    r[0] += 2  # zigzag: +1 in length
    assert _refused(_raw_batch(bytes(r) + b"\x00", 1)).code == Err.INVALID_RECORD


def test_timestamps_outside_the_window() -> None:
    recs = [Record(0, NOW, None, b"a"), Record(1, NOW + 2 * 3_600_000, None, b"b"), Record(2, NOW - 10, None, b"c")]
    e = _refused(build_batch(recs))
    assert e.code == Err.INVALID_TIMESTAMP and [i for i, _m in e.record_errors] == [1]
    rules = TopicRules(timestamp_before_max_ms=5, timestamp_after_max_ms=10**9)
    e = _refused(build_batch(recs), rules)
    assert [i for i, _m in e.record_errors] == [2]
    assert _check(build_batch(recs), TopicRules(timestamp_after_max_ms=10**9)) is not None
    log_append = build_batch([(None, b"x")], base_timestamp=NOW, timestamp_type=1)
    assert _refused(log_append).code == Err.INVALID_TIMESTAMP  # LogAppendTime on a CreateTime topic
    assert _check(log_append, TopicRules(log_append_time=True)) is not None


def test_max_timestamp_is_recomputed_not_trusted() -> None:
    recs = [Record(0, NOW, None, b"a"), Record(1, NOW + 500, None, b"b")]
    lying = _patch(build_batch(recs), max_timestamp=NOW + 10**6)
    fixed = _check(lying)
    h = read_header(fixed)
    assert h.max_timestamp == NOW + 500 and crc32c.crc32c(memoryview(fixed)[21:]) == h.crc
    readonly = _check(bytes(lying))  # a read-only buffer gets a corrected copy
    assert read_header(readonly).max_timestamp == NOW + 500


def test_keys_on_compacted_topics() -> None:
    batch = build_batch([(b"k", b"a"), (None, b"b")], base_timestamp=NOW)
    e = _refused(batch, TopicRules(compacted=True))
    assert e.code == Err.INVALID_RECORD and e.record_errors[0][0] == 1
    assert _check(batch) is not None


def test_every_bad_record_is_named_kafka_s_way() -> None:
    """KIP-467: all keyless records on a compacted topic, not only the first; a keyless record is
    judged by its key before its timestamp; any bad timestamp makes the batch INVALID_TIMESTAMP."""
    keyless = [(b"k", b"a"), (None, b"b"), (b"k", b"c"), (None, b"d"), (None, b"e")]
    e = _refused(build_batch(keyless, base_timestamp=NOW), TopicRules(compacted=True))
    assert e.code == Err.INVALID_RECORD and [i for i, _m in e.record_errors] == [1, 3, 4]
    assert "3 record errors in total" in e.message and all("without key" in m for _i, m in e.record_errors)
    late = NOW + 2 * 3_600_000
    recs = [Record(0, late, None, b"a"), Record(1, late, b"k", b"b"), Record(2, NOW, None, b"c")]
    e = _refused(build_batch(recs), TopicRules(compacted=True))
    assert e.code == Err.INVALID_TIMESTAMP
    assert [(i, "without key" in m) for i, m in e.record_errors] == [(0, True), (1, False), (2, True)]
    e = _refused(build_batch(keyless, timestamp_type=1), TopicRules(compacted=True, log_append_time=True))
    assert e.code == Err.INVALID_RECORD and [i for i, _m in e.record_errors] == [1, 3, 4]


def test_header_rules() -> None:
    ok = build_batch([(None, b"x")], base_timestamp=NOW)
    assert _refused(_patch(ok, base_offset=7)).code == Err.INVALID_RECORD
    assert _refused(_patch(ok, attributes=0x20)).code == Err.INVALID_RECORD  # a control batch
    assert _refused(_patch(ok, producer_id=5, base_sequence=-1)).code == Err.INVALID_RECORD
    bad_crc = bytearray(ok)
    bad_crc[-1] ^= 0xFF
    assert _refused(bad_crc).code == Err.CORRUPT_MESSAGE
    assert _refused(ok + ok).code == Err.INVALID_RECORD  # two batches in one partition's data


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_compression_bomb_is_refused_without_expanding(codec: int) -> None:
    record = bytearray()
    inner = bytearray(b"\x00")  # attributes
    write_varint(inner, 0)
    write_varint(inner, 0)
    write_varint(inner, -1)
    write_varint(inner, 200 << 20)
    write_varint(record, len(inner) + (200 << 20) + 1)
    body = bytes(record) + bytes(inner) + bytes(200 << 20) + b"\x00"
    payload = compress(codec, body)
    buf = bytearray(_raw_batch(b"", 1))
    buf[21:23] = struct.pack(">h", codec)
    buf += payload
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    t0 = time.monotonic()
    e = _refused(_recrc(buf), TopicRules(max_message_bytes=1 << 20))
    assert e.code == Err.INVALID_RECORD and "decompress to more than" in e.message
    assert time.monotonic() - t0 < 5


def test_undecodable_compressed_records() -> None:
    buf = _raw_batch(b"not zstd at all", 1)
    buf[21:23] = struct.pack(">h", ZSTD)
    assert _refused(_recrc(buf)).code == Err.CORRUPT_MESSAGE


@pytest.mark.skipif(walk_native is None, reason="the C walker is not built here")
@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(1, 20),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=4),
    cut=st.integers(0, 64),
    claim=st.integers(-2, 3),
)
def test_the_c_and_python_walkers_agree(n: int, flips: list[tuple[int, int]], cut: int, claim: int) -> None:
    recs = [
        Record(i, NOW + (i * 37) % 11 - 5, b"k" if i % 3 else None, b"v" * i, [("h", b"x")] * (i % 2)) for i in range(n)
    ]
    body = bytearray(build_batch(recs)[HEADER_SIZE:])
    for pos, value in flips:
        body[pos % len(body)] = value
    data = bytes(body[: max(len(body) - cut, 0)])
    count = max(n + claim, 0)
    assert walk_native(data, count) == walk_py(data, count)
    assert walk_py(bytes(build_batch(recs)[HEADER_SIZE:]), n)[0] == WALK_OK
