"""Where the coordinator keeps its records: the interface, and an in-memory store for tests."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from epochlog.protocol.record_batch import iter_batches, set_base_offset


class OffsetsStore(Protocol):
    """The partitions of ``__consumer_offsets``; the server implements it over the real log."""

    num_partitions: int

    async def append(self, partition: int, batch: bytes) -> None:
        """Return once the batch is durable in the log (as for acks=all); raise if it cannot be."""
        ...

    def read_batches(self, partition: int) -> Iterable[bytes]:
        """Every batch of the partition, oldest first, for loading at start."""
        ...


class MemoryOffsetsStore:
    """Keeps batches in lists; offsets are assigned as the log would. ``fail`` makes appends raise."""

    def __init__(self, num_partitions: int = 50) -> None:
        self.num_partitions = num_partitions
        self.partitions: dict[int, list[bytes]] = {}
        self.next_offset: dict[int, int] = {}
        self.fail: Exception | None = None

    async def append(self, partition: int, batch: bytes) -> None:
        if self.fail is not None:
            raise self.fail
        if not 0 <= partition < self.num_partitions:
            raise ValueError(f"partition {partition} out of range")
        buf = bytearray(batch)
        base = self.next_offset.get(partition, 0)
        for pos, h in iter_batches(buf):  # also checks the CRC: the coordinator must write valid batches
            set_base_offset(buf, pos, base)
            base += h.last_offset_delta + 1
        self.next_offset[partition] = base
        self.partitions.setdefault(partition, []).append(bytes(buf))

    def read_batches(self, partition: int) -> Iterable[bytes]:
        return list(self.partitions.get(partition, []))
