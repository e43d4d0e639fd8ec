"""KIP-890 part 1 at a partition leader, sans-IO: which transactional writes the coordinator must confirm
first, and what its answer means for the partition's produce answer.

A transactional batch whose producer has no transaction open on the partition (at the batch's epoch) would
open one there. Without a check, a write that was delayed past its transaction's marker (a retry, a slow
network) opens a transaction no coordinator will ever close, and every read_committed reader stops at it.
So the leader asks the coordinator whether the partition is in the producer's ongoing transaction, and
appends only if it is, and if no marker for the producer landed on the partition while it asked: a marker
in between means the transaction the coordinator vouched for is over, and the write would open a new one.

The driver (the produce handler, the simulator) gathers the facts, asks, and carries out ``answer``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from epochlog.codes import Err

# The coordinator could not answer now (moving, loading, mid-transition): the write is retried.
COORDINATOR_BUSY = frozenset(
    {Err.COORDINATOR_NOT_AVAILABLE, Err.NOT_COORDINATOR, Err.COORDINATOR_LOAD_IN_PROGRESS, Err.CONCURRENT_TRANSACTIONS}
)
# Produce v11 is the first version whose clients know TRANSACTION_ABORTABLE (KIP-890).
FIRST_ABORTABLE_PRODUCE_VERSION = 11


class ProducerEntry(Protocol):
    """What the partition's producer state knows of the batch's producer (storage's ProducerEntry)."""

    @property
    def epoch(self) -> int: ...

    @property
    def current_txn_first_offset(self) -> int: ...  # -1: no transaction open on the partition


@dataclass(frozen=True, slots=True)
class Unverified:
    """A write held for the coordinator's word, and the producer's marker count on the partition when the
    coordinator was asked (a change voids the answer)."""

    topic: str
    partition: int
    producer_id: int
    epoch: int
    markers: int


def needs_verification(transactional: bool, has_producer_id: bool, epoch: int, entry: ProducerEntry | None) -> bool:
    """Whether a batch must wait for the coordinator: a transactional batch whose producer, at this epoch,
    has no transaction open on the partition yet (a later write of an open transaction goes straight in)."""
    if not (transactional and has_producer_id):
        return False
    return entry is None or entry.epoch != epoch or entry.current_txn_first_offset < 0


def by_producer(unverified: Iterable[Unverified]) -> dict[tuple[int, int], list[tuple[str, int]]]:
    """The partitions to ask about, one question per (producer id, epoch)."""
    out: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for u in unverified:
        out.setdefault((u.producer_id, u.epoch), []).append((u.topic, u.partition))
    return out


def not_in_transaction(produce_version: int) -> Err:
    """The refusal of a write whose transaction is not (or no longer) ongoing: the transaction aborts and
    the producer goes on, where the client knows how (KIP-890); an older client gets INVALID_TXN_STATE."""
    if produce_version >= FIRST_ABORTABLE_PRODUCE_VERSION:
        return Err.TRANSACTION_ABORTABLE
    return Err.INVALID_TXN_STATE


def answer(coordinator: Err | None, markers_asked: int, markers_now: int, produce_version: int) -> Err:
    """What a held write gets: NONE (append it now) or the partition's produce error.

    ``coordinator`` is its answer for the partition (None: it gave none). The coordinator's refusal comes
    first; a marker that landed while it was asked refuses a write the coordinator let through."""
    code = Err.COORDINATOR_NOT_AVAILABLE if coordinator is None else coordinator
    if code in (Err.PRODUCER_FENCED, Err.INVALID_PRODUCER_EPOCH):
        return Err.INVALID_PRODUCER_EPOCH
    if code in COORDINATOR_BUSY:
        return Err.NOT_ENOUGH_REPLICAS  # as Kafka: a retriable error every client knows
    if code:
        return not_in_transaction(produce_version)
    if markers_now != markers_asked:
        return not_in_transaction(produce_version)
    return Err.NONE
