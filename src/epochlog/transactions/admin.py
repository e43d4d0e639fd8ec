"""What the coordinator shows of its transactional ids (KIP-664: ListTransactions, DescribeTransactions),
sans-IO: the filters and the states' names live here, the handlers only translate.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from epochlog.transactions.state import TxnMetadata, TxnState
from epochlog.transactions.state import partitions_by_topic as by_topic

STATE_BY_NAME = {s.display: s for s in TxnState}


@dataclass(frozen=True)
class ListFilter:
    """ListTransactions' filters; an empty collection (or a negative duration) filters nothing."""

    states: tuple[str, ...] = ()
    producer_ids: frozenset[int] = frozenset()
    duration_ms: int = -1

    def unknown_states(self) -> list[str]:
        """Names that are no state of Kafka's: echoed back to the client (and they match nothing)."""
        return [s for s in self.states if s not in STATE_BY_NAME]

    def matches(self, txn: TxnMetadata, now_ms: int) -> bool:
        if txn.state is TxnState.DEAD:
            return False  # being removed: Kafka hides it from every listing
        if self.producer_ids and txn.producer_id not in self.producer_ids:
            return False
        # A filter made only of unknown names matches nothing (Kafka tests the names given, not the
        # states they resolved to).
        if self.states and txn.state not in {STATE_BY_NAME[s] for s in self.states if s in STATE_BY_NAME}:
            return False
        # KIP-994: "running longer than" is measured from the transaction's start, as Kafka does. A
        # transactional id with no transaction has no start (-1): it is not running, so never listed here.
        if self.duration_ms >= 0 and (txn.start_ms < 0 or now_ms - txn.start_ms <= self.duration_ms):
            return False
        return True


def list_transactions(txns: Iterable[TxnMetadata], flt: ListFilter, now_ms: int) -> list[TxnMetadata]:
    """The transactional ids ``flt`` lets through, in id order (stable output for tools and tests)."""
    return sorted((t for t in txns if flt.matches(t, now_ms)), key=lambda t: t.transactional_id)


def partitions_by_topic(txn: TxnMetadata) -> dict[str, list[int]]:
    """A transaction's partitions grouped as DescribeTransactions returns them."""
    return by_topic(sorted(txn.partitions))
