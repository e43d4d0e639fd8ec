"""Kafka message structs described as data, and their binary encoding, for the messages kio does not generate:
the group coordinator's records in ``__consumer_offsets`` (server/groups/kafka_group_records.py).

A ``Struct`` is its fields in wire order, each a name and a type: a primitive (``INT8``, ``INT16``, ``INT32``,
``INT64``, ``UUID``, ``STRING``, ``NULLABLE_STRING``, ``BYTES``), an ``Array`` of a type, or a nested
``Struct``. The encoding follows Kafka's message format: big-endian integers, a UUID as its 16 bytes; in a
non-flexible version strings are an int16 length (-1 for null), bytes and arrays an int32 length; in a
flexible version (KIP-482) strings, bytes and arrays are "compact" (unsigned varint of length + 1, 0 for null)
and every struct ends with its tagged fields. We write no tagged fields (the tagged fields of the records we
write default to null) and skip the ones we read.

Values are dicts by field name. Decoding raises ValueError on bytes that do not parse.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import Any

INT8 = "int8"
INT16 = "int16"
INT32 = "int32"
INT64 = "int64"
UUID = "uuid"
STRING = "string"
NULLABLE_STRING = "string?"
BYTES = "bytes"

_INTS = {INT8: struct.Struct(">b"), INT16: struct.Struct(">h"), INT32: struct.Struct(">i"), INT64: struct.Struct(">q")}


@dataclass(frozen=True)
class Array:
    item: FieldType


@dataclass(frozen=True)
class Struct:
    fields: tuple[tuple[str, FieldType], ...]


FieldType = str | Array | Struct


def write_uvarint(out: bytearray, n: int) -> None:
    if n < 0:
        raise ValueError(f"unsigned varint of a negative number: {n}")
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def encode(schema: Struct, value: dict[str, Any], flexible: bool) -> bytes:
    out = bytearray()
    _write_struct(out, schema, value, flexible)
    return bytes(out)


def _write_length(out: bytearray, n: int, flexible: bool, wide: bool) -> None:
    """The length before a string, bytes or array; -1 stands for null."""
    if flexible:
        write_uvarint(out, n + 1)
    else:
        out += struct.pack(">i" if wide else ">h", n)


def _write_struct(out: bytearray, schema: Struct, value: dict[str, Any], flexible: bool) -> None:
    for name, ftype in schema.fields:
        _write(out, ftype, value[name], flexible)
    if flexible:
        out.append(0)  # no tagged fields


def _write(out: bytearray, ftype: FieldType, v: Any, flexible: bool) -> None:
    if isinstance(ftype, Struct):
        _write_struct(out, ftype, v, flexible)
    elif isinstance(ftype, Array):
        _write_length(out, len(v), flexible, True)
        for item in v:
            _write(out, ftype.item, item, flexible)
    elif ftype in _INTS:
        out += _INTS[ftype].pack(v)
    elif ftype == UUID:
        out += v.bytes
    elif ftype in (STRING, NULLABLE_STRING, BYTES):
        if v is None:
            if ftype == STRING:
                raise ValueError("null for a non-nullable string")
            _write_length(out, -1, flexible, ftype == BYTES)
            return
        b = v if ftype == BYTES else v.encode()
        _write_length(out, len(b), flexible, ftype == BYTES)
        out += b
    else:
        raise ValueError(f"unknown field type {ftype!r}")


def decode(schema: Struct, data: bytes, pos: int, flexible: bool) -> tuple[dict[str, Any], int]:
    """The struct at ``pos`` and the position after it."""
    try:
        return _Reader(data, pos, flexible).struct(schema)
    except (struct.error, IndexError, UnicodeDecodeError) as e:
        raise ValueError(f"truncated or malformed struct: {e}") from e


class _Reader:
    def __init__(self, data: bytes, pos: int, flexible: bool) -> None:
        self.data, self.pos, self.flexible = data, pos, flexible

    def uvarint(self) -> int:
        v = shift = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            v |= (b & 0x7F) << shift
            if not b & 0x80:
                return v
            shift += 7
            if shift > 28:
                raise ValueError("unsigned varint too long")

    def length(self, wide: bool) -> int:
        if self.flexible:
            return self.uvarint() - 1
        n: int = struct.unpack_from(">i" if wide else ">h", self.data, self.pos)[0]
        self.pos += 4 if wide else 2
        return n

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError(f"length {n} runs past the end")
        b = self.data[self.pos : self.pos + n]
        self.pos += n
        return bytes(b)

    def struct(self, schema: Struct) -> tuple[dict[str, Any], int]:
        out = {name: self.read(ftype) for name, ftype in schema.fields}
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()  # the tag: none of the fields we read is tagged
                self.take(self.uvarint())
        return out, self.pos

    def read(self, ftype: FieldType) -> Any:
        if isinstance(ftype, Struct):
            return self.struct(ftype)[0]
        if isinstance(ftype, Array):
            n = self.length(True)
            if n < 0:
                raise ValueError("null array")
            return [self.read(ftype.item) for _ in range(n)]
        if ftype in _INTS:
            s = _INTS[ftype]
            v = s.unpack_from(self.data, self.pos)[0]
            self.pos += s.size
            return v
        if ftype == UUID:
            return uuid.UUID(bytes=self.take(16))
        if ftype in (STRING, NULLABLE_STRING, BYTES):
            n = self.length(ftype == BYTES)
            if n < 0:
                if ftype == STRING:
                    raise ValueError("null in a non-nullable string")
                return None
            b = self.take(n)
            return b if ftype == BYTES else b.decode()
        raise ValueError(f"unknown field type {ftype!r}")
