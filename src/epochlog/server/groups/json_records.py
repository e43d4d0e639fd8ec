"""The layout epochlog wrote the KIP-848 and KIP-932 group records in before it wrote Kafka's, read (never
written) so that those logs still load (consumer_records_json.py and share_records_json.py): a key is an int16
key version and int16-length strings (group id, then member id), as Kafka's keys are; a value is int16
VALUE_VERSION and the record's fields as UTF-8 JSON, partitions as sorted [topic, partition] pairs; a tombstone
is a key without a value."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

VALUE_VERSION = 0
T = TypeVar("T")


def partitions(v: list[list[Any]]) -> frozenset[tuple[str, int]]:
    return frozenset((str(t), int(p)) for t, p in v)


def read_key(data: bytes) -> tuple[int, list[str]]:
    (version,) = struct.unpack_from(">h", data, 0)
    pos, parts = 2, []
    while pos < len(data):
        (n,) = struct.unpack_from(">h", data, pos)
        parts.append(data[pos + 2 : pos + 2 + n].decode())
        pos += 2 + n
    return version, parts


def decode(
    data: bytes,
    val: bytes | None,
    decoders: Mapping[int, Callable[[str, str, dict[str, Any]], T]],
    tombstones: Mapping[int, Callable[[str, str], T]],
    what: str,
) -> T | None:
    """The record a (key, value) holds by its key version's decoder; None for a key version not in
    ``decoders`` (another kind of record) or a tombstone of a record that has none. Raises ValueError on
    bytes that do not parse."""
    try:
        version, parts = read_key(data)
        if version not in decoders or not parts:
            return None
        group_id, member_id = parts[0], parts[1] if len(parts) > 1 else ""
        if val is None:
            tomb = tombstones.get(version)
            return tomb(group_id, member_id) if tomb is not None else None
        (value_version,) = struct.unpack_from(">h", val, 0)
        if value_version != VALUE_VERSION:
            raise ValueError(f"unknown value version {value_version} of key version {version}")
        return decoders[version](group_id, member_id, json.loads(val[2:]))
    except (struct.error, KeyError, TypeError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"unreadable {what} record: {e}") from e
