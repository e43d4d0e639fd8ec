"""The schema-driven struct codec (protocol/struct_schema.py) against Kafka's encoding rules, byte for byte: int16
lengths and int32 array counts in non-flexible versions, compact (varint length + 1) ones and a tagged-field
section per struct in flexible versions, null as -1 or 0, and unknown tagged fields skipped on read."""

from __future__ import annotations

import uuid

import pytest

from epochlog.protocol import struct_schema as s

ITEM = s.Struct((("Id", s.UUID), ("Ns", s.Array(s.INT32))))
SCHEMA = s.Struct(
    (
        ("A", s.INT8),
        ("B", s.INT16),
        ("C", s.INT64),
        ("Name", s.STRING),
        ("Maybe", s.NULLABLE_STRING),
        ("Blob", s.BYTES),
        ("Items", s.Array(ITEM)),
    )
)
ID = uuid.UUID(int=0x0102)
VALUE = {"A": -1, "B": 2, "C": 3, "Name": "ab", "Maybe": None, "Blob": b"\x09", "Items": [{"Id": ID, "Ns": [7]}]}
ID_BYTES = b"\x00" * 14 + b"\x01\x02"


def test_non_flexible_layout() -> None:
    expected = (
        b"\xff"  # A int8
        + b"\x00\x02"  # B int16
        + b"\x00" * 7
        + b"\x03"  # C int64
        + b"\x00\x02ab"  # Name: int16 length
        + b"\xff\xff"  # Maybe: null
        + b"\x00\x00\x00\x01\x09"  # Blob: int32 length
        + b"\x00\x00\x00\x01"  # Items: int32 count
        + ID_BYTES
        + b"\x00\x00\x00\x01\x00\x00\x00\x07"
    )
    assert s.encode(SCHEMA, VALUE, flexible=False) == expected
    assert s.decode(SCHEMA, expected, 0, flexible=False) == (VALUE, len(expected))


def test_flexible_layout() -> None:
    expected = (
        b"\xff\x00\x02"
        + b"\x00" * 7
        + b"\x03"
        + b"\x03ab"  # compact string: length + 1
        + b"\x00"  # compact null
        + b"\x02\x09"
        + b"\x02"  # one item
        + ID_BYTES
        + b"\x02\x00\x00\x00\x07"
        + b"\x00"  # the item's tagged fields
        + b"\x00"  # the top level's
    )
    assert s.encode(SCHEMA, VALUE, flexible=True) == expected
    assert s.decode(SCHEMA, expected, 0, flexible=True) == (VALUE, len(expected))


def test_long_compact_lengths_and_unknown_tags() -> None:
    schema = s.Struct((("Name", s.STRING),))
    data = s.encode(schema, {"Name": "x" * 200}, flexible=True)
    assert data[:2] == b"\xc9\x01"  # 201 as an unsigned varint
    assert s.decode(schema, data, 0, flexible=True)[0] == {"Name": "x" * 200}
    # A writer that knows a tagged field we do not (tag 0, 3 bytes): skipped.
    tagged = b"\x02y" + b"\x01" + b"\x00\x03abc"
    assert s.decode(schema, tagged, 0, flexible=True) == ({"Name": "y"}, len(tagged))


@pytest.mark.parametrize(
    "data",
    [b"\x05ab", b"\x00\x00", b"\x03a", b"\x02\xff\x00", b"\x80\x80\x80\x80\x80\x01"],
)
def test_bad_bytes_raise_value_error(data: bytes) -> None:
    # truncated string, null in a non-nullable string, short string, invalid UTF-8 (then no tags), endless varint
    with pytest.raises(ValueError):
        s.decode(s.Struct((("Name", s.STRING),)), data, 0, flexible=True)


def test_null_for_a_non_nullable_string_is_refused() -> None:
    with pytest.raises(ValueError):
        s.encode(s.Struct((("Name", s.STRING),)), {"Name": None}, flexible=True)
