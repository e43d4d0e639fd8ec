"""Records inside v2 batches: round trips per codec, CRC, edge cases, and interop with kafka-python."""

from __future__ import annotations

import struct

import cramjam
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from epochlog.protocol.record_batch import CorruptBatchError, crc_ok, iter_batches, read_header
from epochlog.protocol.records import (
    GZIP,
    LOG_APPEND_TIME,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    Record,
    build_batch,
    compress,
    decode_batch,
    decompress,
    iter_records,
    read_varint,
    write_varint,
)

CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]


def _sample() -> list[Record]:
    return [
        Record(0, 1_700_000_000_000, b"k0", b"v0", [("h1", b"x"), ("h2", None)]),
        Record(1, 1_700_000_000_005, None, b"value only", []),
        Record(2, 1_699_999_999_990, b"key only", None, [("\u00e9t\u00e9", b"")]),  # earlier timestamp: delta < 0
        Record(3, 1_700_000_000_001, b"", b"", []),
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_every_codec(codec: int) -> None:
    recs = _sample()
    buf = build_batch(recs, base_offset=100, compression=codec, partition_leader_epoch=7)
    h, out = decode_batch(buf)
    assert h.compression == codec
    assert h.base_offset == 100 and h.last_offset == 103 and h.record_count == 4
    assert h.partition_leader_epoch == 7
    assert h.base_timestamp == recs[0].timestamp
    assert h.max_timestamp == max(r.timestamp for r in recs)
    assert crc_ok(buf, 0, h)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in out] == [
        (100 + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(recs)
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_large_values(codec: int) -> None:
    big = bytes(range(256)) * 8192  # 2 MiB, spans many lz4 64 KiB blocks
    buf = build_batch([(b"k", big), (None, big[::-1])], compression=codec, base_timestamp=5)
    _, out = decode_batch(buf)
    assert out[0].value == big and out[1].value == big[::-1] and out[1].key is None
    assert out[0].timestamp == 5


def test_pairs_and_producer_fields() -> None:
    buf = build_batch(
        [(b"a", b"1"), (b"b", b"2")],
        base_timestamp=42,
        producer_id=9,
        producer_epoch=3,
        base_sequence=11,
        is_transactional=True,
    )
    h, out = decode_batch(buf)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (9, 3, 11, 12)
    assert h.is_transactional and not h.is_control
    assert [(r.offset, r.timestamp) for r in out] == [(0, 42), (1, 42)]


def test_log_append_time_reports_max_timestamp() -> None:
    buf = build_batch([Record(0, 10, None, b"a"), Record(1, 20, None, b"b")], timestamp_type=LOG_APPEND_TIME)
    h, out = decode_batch(buf)
    assert h.is_log_append_time
    assert [r.timestamp for r in out] == [20, 20]


def test_control_batch_flag() -> None:
    h, _ = decode_batch(build_batch([(struct.pack(">hh", 0, 1), b"")], is_control=True))
    assert h.is_control


def test_crc_is_checked_and_covers_only_bytes_after_it() -> None:
    buf = bytearray(build_batch([(b"k", b"vvvv")], base_timestamp=1))
    # baseOffset and partitionLeaderEpoch sit outside the CRC: the broker patches them in place.
    struct.pack_into(">q", buf, 0, 12345)
    struct.pack_into(">i", buf, 12, 99)
    h, out = decode_batch(buf)
    assert out[0].offset == 12345 and h.partition_leader_epoch == 99
    buf[-2] ^= 0xFF  # a byte of the value (the last byte is the header count)
    with pytest.raises(CorruptBatchError, match="CRC32C"):
        decode_batch(buf)
    decode_batch(buf, verify_crc=False)  # still parses: the value byte changed, not the framing


def test_truncated_batch_is_rejected() -> None:
    buf = build_batch([(b"k", b"v" * 100)])
    with pytest.raises(CorruptBatchError):
        decode_batch(buf[:-10])
    with pytest.raises(CorruptBatchError):
        decode_batch(buf[:30])


def test_garbage_compressed_payload_is_a_corrupt_batch() -> None:
    buf = bytearray(build_batch([(b"k", b"v" * 100)], compression=ZSTD))
    buf[61:70] = b"\x00" * 9
    with pytest.raises(CorruptBatchError):
        decode_batch(buf, verify_crc=False)


def test_iter_records_over_many_batches() -> None:
    data = b"".join(
        build_batch([(b"k", f"{base}-{i}".encode()) for i in range(3)], base_offset=base, compression=c)
        for base, c in ((0, NONE), (3, GZIP), (6, LZ4))
    )
    assert [r.offset for r in iter_records(data)] == list(range(9))
    assert [r.value for r in iter_records(data)][4] == b"3-1"


def test_empty_batch() -> None:
    h, out = decode_batch(build_batch([], base_timestamp=7))
    assert out == [] and h.record_count == 0 and h.last_offset_delta == -1 and h.max_timestamp == 7


@pytest.mark.parametrize("n", [0, 1, -1, 63, -64, 64, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)])
def test_varint_round_trip(n: int) -> None:
    out = bytearray()
    write_varint(out, n)
    assert read_varint(bytes(out), 0) == (n, len(out))


def test_snappy_xerial_framing_is_read() -> None:
    raw = b"hello snappy " * 1000
    blocks = [raw[:5000], raw[5000:]]
    framed = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for b in blocks:
        c = bytes(cramjam.snappy.compress_raw(b))
        framed += struct.pack(">i", len(c)) + c
    assert decompress(SNAPPY, bytes(framed)) == raw
    assert decompress(SNAPPY, compress(SNAPPY, raw)) == raw


def test_lz4_frame_has_independent_blocks() -> None:
    frame = compress(LZ4, b"x" * 200_000)
    assert frame[:4] == b"\x04\x22\x4d\x18"  # LZ4 frame magic
    assert frame[4] & 0x20, "Kafka's Java reader rejects linked lz4 blocks"


# -- interop with kafka-python's record builder/reader ------------------------------------------
@pytest.mark.parametrize("codec", CODECS)
def test_decode_a_batch_built_by_kafka_python(codec: int) -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=1 << 20,
    )  # fmt: skip
    builder.append(0, timestamp=1000, key=b"k0", value=b"v0" * 500, headers=[("h", b"1")])
    builder.append(1, timestamp=1003, key=None, value=b"v1", headers=[])
    builder.append(2, timestamp=1001, key=b"k2", value=None, headers=[("a", None)])
    buf = bytes(builder.build())
    h = read_header(buf)
    assert h.compression == codec and crc_ok(buf, 0, h)
    _, out = decode_batch(buf)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in out] == [
        (0, 1000, b"k0", b"v0" * 500, [("h", b"1")]),
        (1, 1003, None, b"v1", []),
        (2, 1001, b"k2", None, [("a", None)]),
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_reads_our_batch(codec: int) -> None:
    recs = _sample()
    buf = build_batch(recs, base_offset=50, compression=codec)
    assert [pos for pos, _ in iter_batches(buf)] == [0]
    batch = DefaultRecordBatch(bytearray(buf))
    assert batch.validate_crc()
    assert batch.compression_type == codec
    got = [(r.offset, r.timestamp, r.key, r.value, [tuple(x) for x in r.headers]) for r in batch]
    assert got == [(50 + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(recs)]
