"""What a share-partition may offer of what it read from the log, by the group's ``share.isolation.level``.

- read_uncommitted (Kafka's default): everything up to the high watermark is offered, aborted transactions'
  records included.
- read_committed: the read stops at the last stable offset (below it every transaction is decided), and the
  records of aborted transactions are never delivered: their offsets are archived (``SharePartition.acquire``'s
  ``aborted``), as Kafka 4.1's share-partition archives them when it acquires.

Control batches (transaction markers) are offered under neither: the share-partition treats their offsets as
ones the log does not have.

A batch is aborted when it is transactional and an aborted transaction of its producer spans it: the
transaction starts at or before the batch and its ABORT marker comes after it. The broker knows each aborted
transaction's marker offset (its transaction index), so no marker needs to be read to tell where it ended.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from epochlog.groups.share.model import READ_COMMITTED

Ranges = list[tuple[int, int]]


@dataclass(frozen=True)
class LogBatch:
    """What the decision needs of one record batch read from the log."""

    first_offset: int
    last_offset: int
    producer_id: int = -1
    transactional: bool = False
    control: bool = False


@dataclass(frozen=True)
class AbortedTxn:
    """An aborted transaction as the transaction index has it."""

    producer_id: int
    first_offset: int
    marker_offset: int  # the ABORT marker's offset


def read_limit(isolation_level: str, high_watermark: int, last_stable_offset: int) -> int:
    """Where the share-partition's read of the log stops (exclusive)."""
    if isolation_level == READ_COMMITTED:
        return min(last_stable_offset, high_watermark)
    return high_watermark


def _aborted(b: LogBatch, by_producer: dict[int, list[AbortedTxn]]) -> bool:
    if not b.transactional:
        return False
    return any(
        t.first_offset <= b.first_offset and b.last_offset < t.marker_offset for t in by_producer.get(b.producer_id, ())
    )


def offered(
    isolation_level: str, batches: Sequence[LogBatch], aborted_txns: Iterable[AbortedTxn] = ()
) -> tuple[Ranges, Ranges]:
    """(the data batches' offset ranges to acquire, the offset ranges to archive undelivered) of ``batches``."""
    by_producer: dict[int, list[AbortedTxn]] = {}
    if isolation_level == READ_COMMITTED:
        for t in aborted_txns:
            by_producer.setdefault(t.producer_id, []).append(t)
    data: Ranges = []
    dead: Ranges = []
    for b in batches:
        if b.control:
            continue
        (dead if _aborted(b, by_producer) else data).append((b.first_offset, b.last_offset))
    return data, dead
