"""A schema-walking reader for kio entities that skips unknown tagged fields and never trusts a length.

kio's native reader raises on a tagged field it does not know, while the protocol says a receiver must
ignore them (KIP-482). Worse, it allocates whatever an array length prefix claims before reading a single
element, so a 40-byte frame claiming 2^32 elements aborts the whole process (a Rust allocation failure,
not an exception). This reader checks every array length against the bytes that are left (each element
takes at least one byte) before reading it, so a lie becomes an ordinary decode error. The broker decodes
every request body with it (protocol/codec.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from functools import cache
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin

from kio._kio_native import (
    get_field_reader,
    read_compact_array_length,
    read_int8,
    read_legacy_array_length,
    read_unsigned_varint,
)
from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveTupleField, classify_field
from kio.serial.readers import SizedResult
from kio.static.protocol import Entity

Reader = Callable[[Any, int], SizedResult[Any]]


def _field_tag(field: Any) -> int | None:
    tag = field.metadata.get("tag")
    return int(tag) if tag is not None else None


@cache
def tolerant_reader(cls: type[Entity], nullable: bool = False) -> Reader:
    flexible = bool(cls.__flexible__)
    is_header = cls.__name__ == "RequestHeader"
    plain: list[tuple[str, Reader]] = []
    tagged: dict[int, tuple[str, Reader]] = {}
    for f in fields(cls):
        tag = _field_tag(f)
        kind = classify_field(f)
        reader: Reader
        if isinstance(kind, EntityTupleField):
            reader = _array_reader(tolerant_reader(kind.type_), flexible, _nullable_array(f))
        elif isinstance(kind, EntityField):
            reader = tolerant_reader(kind.type_, tag is None and _nullable_array(f))
        elif isinstance(kind, PrimitiveTupleField):
            reader = _guarded(get_field_reader(cls, f, is_header, tag is not None), flexible, _nullable_array(f))
        else:
            reader = get_field_reader(cls, f, is_header, tag is not None)
        if tag is None:
            plain.append((f.name, reader))
        else:
            tagged[tag] = (f.name, reader)

    def read(buf: Any, offset: int) -> SizedResult[Any]:
        start = offset
        if nullable:
            marker, n = read_int8(buf, offset)
            offset += n
            if marker < 0:
                return None, offset - start
        values: dict[str, Any] = {}
        for name, reader in plain:
            values[name], n = reader(buf, offset)
            offset += n
        if flexible:
            count, n = read_unsigned_varint(buf, offset)
            offset += n
            for _ in range(count):
                tag, n = read_unsigned_varint(buf, offset)
                offset += n
                size, n = read_unsigned_varint(buf, offset)
                offset += n
                known = tagged.get(tag)
                if known is not None:
                    values[known[0]], _ = known[1](buf, offset)
                offset += size
        return cls(**values), offset - start

    return read


class ArrayLengthError(ValueError):
    """An array claims more elements than there are bytes left in the frame, or is null where the schema
    does not allow it (the native reader hands back None, which handlers would iterate; Kafka refuses)."""


def _check_length(length: int, buf: Any, offset: int) -> None:
    left = len(buf) - offset
    if length > left:
        raise ArrayLengthError(f"array claims {length} elements with {left} bytes left")


def _nullable_array(field: Any) -> bool:
    """Whether the array itself may be null (``tuple[...] | None``); kio's is_optional looks inside tuples."""
    return get_origin(field.type) in (UnionType, Union) and NoneType in get_args(field.type)


def _check_null(length: int | None, nullable: bool) -> None:
    if not nullable and (length is None or length < 0):
        raise ArrayLengthError("null array in a field that is not nullable")


def _guarded(native: Reader, flexible: bool, nullable: bool) -> Reader:
    """A native primitive-array reader, called only once its length prefix is known to be possible."""
    length_reader = read_compact_array_length if flexible else read_legacy_array_length

    def read(buf: Any, offset: int) -> SizedResult[Any]:
        length, n = length_reader(buf, offset)
        _check_null(length, nullable)
        if length is not None and length > 0:
            _check_length(length, buf, offset + n)
        return native(buf, offset)

    return read


def _array_reader(item: Reader, flexible: bool, nullable: bool) -> Reader:
    length_reader = read_compact_array_length if flexible else read_legacy_array_length

    def read(buf: Any, offset: int) -> SizedResult[Any]:
        start = offset
        length, n = length_reader(buf, offset)
        _check_null(length, nullable)
        offset += n
        if length is None or length < 0:
            return None, offset - start
        _check_length(length, buf, offset)
        items = []
        for _ in range(length):
            value, n = item(buf, offset)
            offset += n
            items.append(value)
        return tuple(items), offset - start

    return read
