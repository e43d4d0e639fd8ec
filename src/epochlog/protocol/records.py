"""Records inside a v2 record batch: build batches and decode them, with all four codecs.

The broker never decodes records on the produce or replication path; this is for the places
that must (the group coordinator's ``__consumer_offsets`` records, dump-log, tests).
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field

import cramjam
import crc32c

from epochlog.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    BatchHeader,
    iter_batches,
    read_header,
)

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
_XERIAL_MAGIC = b"\x82SNAPPY\x00"


@dataclass
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def write_varint(out: bytearray, n: int) -> None:
    v = _zigzag(n) & 0xFFFFFFFFFFFFFFFF
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = 0
    v = 0
    while True:
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")
    return (v >> 1) ^ -(v & 1), pos


def _write_bytes(out: bytearray, b: bytes | None) -> None:
    if b is None:
        write_varint(out, -1)
    else:
        write_varint(out, len(b))
        out += b


def _read_bytes(buf: bytes | memoryview, pos: int) -> tuple[bytes | None, int]:
    n, pos = read_varint(buf, pos)
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise ValueError("record field runs past the end of the batch")
    return bytes(buf[pos : pos + n]), pos + n


def compress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec {codec}")


def decompress(codec: int, data: bytes) -> bytes:
    if codec == NONE:
        return data
    if codec == GZIP:
        return bytes(cramjam.gzip.decompress(data))
    if codec == SNAPPY:
        if data.startswith(_XERIAL_MAGIC):  # the Java client's framed snappy
            out = bytearray()
            pos = 16
            while pos < len(data):
                (n,) = struct.unpack_from(">i", data, pos)
                out += bytes(cramjam.snappy.decompress_raw(data[pos + 4 : pos + 4 + n]))
                pos += 4 + n
            return bytes(out)
        return bytes(cramjam.snappy.decompress_raw(data))
    if codec == LZ4:
        return bytes(cramjam.lz4.decompress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.decompress(data))
    raise ValueError(f"unknown compression codec {codec}")


def build_batch(
    records: list[tuple[bytes | None, bytes | None]] | list[Record],
    *,
    base_offset: int = 0,
    base_timestamp: int | None = None,
    compression: int = NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    is_control: bool = False,
    log_append_time: bool = False,
) -> bytes:
    """A complete v2 batch with a correct CRC32C. Records are (key, value) pairs or Record objects."""
    now = base_timestamp if base_timestamp is not None else time.time_ns() // 1_000_000
    body = bytearray()
    max_ts = now
    for i, r in enumerate(records):
        if isinstance(r, Record):
            key, value, headers, ts = r.key, r.value, r.headers, r.timestamp
        else:
            key, value, headers, ts = r[0], r[1], [], now
        max_ts = max(max_ts, ts)
        rec = bytearray(b"\x00")  # attributes
        write_varint(rec, ts - now)
        write_varint(rec, i)
        _write_bytes(rec, key)
        _write_bytes(rec, value)
        write_varint(rec, len(headers))
        for hk, hv in headers:
            _write_bytes(rec, hk.encode())
            _write_bytes(rec, hv)
        write_varint(body, len(rec))
        body += rec
    payload = compress(compression, bytes(body))
    attributes = (
        (compression & COMPRESSION_MASK) | (0x08 if log_append_time else 0) | (CONTROL_MASK if is_control else 0)
    )
    n = len(records)
    tail = struct.pack(">hiqqqhii", attributes, n - 1, now, max_ts, producer_id, producer_epoch, base_sequence, n)
    crc = crc32c.crc32c(tail + payload)
    length = 4 + 1 + 4 + len(tail) + len(payload)  # epoch, magic, crc, rest
    return struct.pack(">qiibI", base_offset, length, partition_leader_epoch, 2, crc) + tail + payload


def decode_batch(buf: bytes | memoryview, pos: int = 0) -> tuple[BatchHeader, list[Record]]:
    h = read_header(buf, pos)
    payload = bytes(buf[pos + HEADER_SIZE : pos + h.size])
    data = decompress(h.compression, payload)
    out: list[Record] = []
    p = 0
    for _ in range(h.record_count):
        length, p = read_varint(data, p)
        end = p + length
        p += 1  # attributes
        ts_delta, p = read_varint(data, p)
        off_delta, p = read_varint(data, p)
        key, p = _read_bytes(data, p)
        value, p = _read_bytes(data, p)
        nh, p = read_varint(data, p)
        headers = []
        for _ in range(nh):
            hk, p = _read_bytes(data, p)
            hv, p = _read_bytes(data, p)
            headers.append(((hk or b"").decode("utf-8", "replace"), hv))
        ts = h.max_timestamp if h.is_log_append_time else h.base_timestamp + ts_delta
        out.append(Record(h.base_offset + off_delta, ts, key, value, headers))
        p = end
    return h, out


def iter_records(buf: bytes | memoryview) -> list[Record]:
    out: list[Record] = []
    for pos, _h in iter_batches(buf, validate_crc=False):
        out.extend(decode_batch(buf, pos)[1])
    return out


__all__ = ["ATTRIBUTES_OFFSET", "Record", "build_batch", "decode_batch", "iter_records"]
