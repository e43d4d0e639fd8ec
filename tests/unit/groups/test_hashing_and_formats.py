"""partition_for against Java's String.hashCode, and the __consumer_offsets key/value formats."""

from __future__ import annotations

import struct

import pytest

from epochlog.server.groups import java_string_hash, partition_for
from epochlog.server.groups import records as rec


def _closed_form(s: str) -> int:
    # s[0]*31^(n-1) + s[1]*31^(n-2) + ... + s[n-1] over UTF-16 code units, as a signed int32.
    units = struct.unpack(f">{len(s.encode('utf-16-be')) // 2}H", s.encode("utf-16-be"))
    n = len(units)
    h = sum(u * pow(31, n - 1 - i, 1 << 32) for i, u in enumerate(units)) % (1 << 32)
    return h - (1 << 32) if h >= 1 << 31 else h


@pytest.mark.parametrize(
    ("s", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),
        ("polygenelubricants", -(2**31)),  # the famous Integer.MIN_VALUE hash
        ("\U0001f600", 0xD83D * 31 + 0xDE00),  # a surrogate pair counts as two chars in Java
    ],
)
def test_java_string_hash_known_values(s: str, expected: int) -> None:
    assert java_string_hash(s) == expected == _closed_form(s)


@pytest.mark.parametrize("s", ["my-group", "console-consumer-12345", "spark-kafka-source-\u00e9t\u00e9", "x" * 100])
def test_java_string_hash_matches_the_closed_form(s: str) -> None:
    assert java_string_hash(s) == _closed_form(s)


def test_partition_for() -> None:
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("polygenelubricants", 50) == 0  # Kafka's Utils.abs(MIN_VALUE) is 0
    neg = "console-consumer-12345"
    assert partition_for(neg, 50) == abs(java_string_hash(neg)) % 50


def test_group_metadata_value_round_trip() -> None:
    v = rec.GroupValue("consumer", 3, "range", "m1", 123, [("m1", "inst", "cid", "/1.2.3.4", 30000, 10000, b"s", b"a")])
    data = rec.group_value(v)
    assert data[:2] == b"\x00\x03"
    assert rec.decode_group_value(data) == v
    assert rec.decode_key(rec.group_key("grp")) == rec.GroupKey("grp")
    assert rec.group_key("grp") == b"\x00\x02\x00\x03grp"


def test_old_offset_value_versions() -> None:
    v0 = struct.pack(">hq", 0, 5) + b"\x00\x02md" + struct.pack(">q", 77)
    assert rec.decode_offset_value(v0) == rec.OffsetValue(5, -1, "md", 77)
    v1 = struct.pack(">hq", 1, 5) + b"\x00\x00" + struct.pack(">qq", 77, 99)  # with expireTimestamp
    assert rec.decode_offset_value(v1) == rec.OffsetValue(5, -1, "", 77)


def test_flexible_offset_value_v4() -> None:
    # compact string "md" = length+1 as unsigned varint, then an empty tagged-field section
    v4 = struct.pack(">hqi", 4, 5, 2) + b"\x03md" + struct.pack(">q", 77) + b"\x00"
    assert rec.decode_offset_value(v4) == rec.OffsetValue(5, 2, "md", 77)


def test_unknown_key_versions_are_ignored() -> None:
    assert rec.decode_key(b"\x00\x05whatever") is None
