"""A transactional id's state at its coordinator (KIP-98): the states, which may follow which, and the
metadata each ``__transaction_state`` record holds.

State ids are Kafka's (TransactionState): they are what the log stores and DescribeTransactions shows.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# An epoch at this value cannot be bumped: the producer gets a new id at epoch 0 (Kafka's
# Short.MAX_VALUE - 1, which leaves room for one fencing bump).
MAX_PRODUCER_EPOCH = 32766


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display(self) -> str:
        """The name Kafka's tools print (DescribeTransactions, ListTransactions)."""
        return "".join(w.capitalize() for w in self.name.split("_"))

    @property
    def is_complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def is_prepare(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


_FROM: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset(
        {TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}
    ),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}


def may_follow(new: TxnState, old: TxnState) -> bool:
    return old in _FROM[new]


TopicPartition = tuple[str, int]


def partitions_by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """Partition numbers per topic, in the order met: the shape of every transaction API's topic list."""
    out: dict[str, list[int]] = {}
    for topic, partition in partitions:
        out.setdefault(topic, []).append(partition)
    return out


@dataclass(frozen=True)
class TxnMetadata:
    """One record of ``__transaction_state``: everything the coordinator knows of a transactional id."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = field(default_factory=frozenset)
    start_ms: int = -1  # when the current transaction began (its first AddPartitions)
    last_update_ms: int = -1
    # The id and epoch this producer had before its last bump (KIP-360: a retried InitProducerId with the
    # old pair is recognised rather than fenced).
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH

    def to(self, state: TxnState, now_ms: int, **changes: object) -> TxnMetadata:
        if not may_follow(state, self.state):
            raise IllegalTransition(f"{self.transactional_id}: {self.state.display} -> {state.display}")
        return replace(self, state=state, last_update_ms=now_ms, **changes)  # type: ignore[arg-type]


class IllegalTransition(Exception):
    """A transition Kafka's state machine does not allow: a bug in the caller, never a client's doing."""
