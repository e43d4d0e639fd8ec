"""Which ``__consumer_offsets`` partition holds a group: the same partition Kafka picks."""

from __future__ import annotations

import struct

_INT_MIN = -(1 << 31)


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: over UTF-16 code units (so a non-BMP character counts twice), int32."""
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    h = java_string_hash(group_id)
    # Kafka's Utils.abs maps Integer.MIN_VALUE to 0 rather than overflowing.
    return (0 if h == _INT_MIN else abs(h)) % num_partitions
