"""share.isolation.level in the share-partition core: read_committed reads up to the last stable offset, offers
committed and non-transactional batches, archives aborted transactions' records undelivered (SPSO moves past
them, the state write says ARCHIVED), never offers control batches; read_uncommitted offers aborted records."""

from __future__ import annotations

import pytest

from epochlog.groups.share.isolation import AbortedTxn, LogBatch, offered, read_limit
from epochlog.groups.share.messages import AckBatch, Acquired, StateWrite
from epochlog.groups.share.model import (
    ACCEPT,
    ARCHIVED,
    AVAILABLE,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    RELEASE,
    SharePartitionConfig,
)
from epochlog.groups.share.partition import SharePartition
from epochlog.groups.share.records import PartitionState, StateBatch

pytestmark = pytest.mark.unit

CFG = SharePartitionConfig(record_lock_duration_ms=1000, delivery_count_limit=3, max_record_locks=100)

# A log: a plain batch (0-1), producer 7's aborted transaction (2-3, 5; marker 6) interleaved with producer 8's
# committed one (4; marker 7), then producer 7's next, committed, transaction (8-9; marker 10).
LOG = [
    LogBatch(0, 1),
    LogBatch(2, 3, 7, True),
    LogBatch(4, 4, 8, True),
    LogBatch(5, 5, 7, True),
    LogBatch(6, 6, 7, True, control=True),
    LogBatch(7, 7, 8, True, control=True),
    LogBatch(8, 9, 7, True),
    LogBatch(10, 10, 7, True, control=True),
]
ABORTED = [AbortedTxn(7, 2, 6)]


def writes(effects: list) -> list[StateWrite]:
    return [e for e in effects if isinstance(e, StateWrite)]


def test_read_limit_is_the_lso_only_under_read_committed() -> None:
    assert read_limit(READ_COMMITTED, 50, 30) == 30
    assert read_limit(READ_UNCOMMITTED, 50, 30) == 50
    assert read_limit(READ_COMMITTED, 50, 50) == 50


def test_read_committed_splits_the_aborted_transaction_out() -> None:
    data, dead = offered(READ_COMMITTED, LOG, ABORTED)
    assert data == [(0, 1), (4, 4), (8, 9)]
    assert dead == [(2, 3), (5, 5)]


def test_read_uncommitted_offers_aborted_records_but_never_markers() -> None:
    data, dead = offered(READ_UNCOMMITTED, LOG, ABORTED)
    assert data == [(0, 1), (2, 3), (4, 4), (5, 5), (8, 9)]
    assert dead == []


def test_only_the_aborting_producers_transactional_batches_inside_the_transaction_are_aborted() -> None:
    log = [
        LogBatch(0, 0, 7, True),  # producer 7's earlier transaction, before the aborted one starts
        LogBatch(1, 1, 7, False),  # producer 7 idempotent, not transactional
        LogBatch(2, 2, 9, True),  # another producer inside the aborted transaction's span
        LogBatch(3, 4, 7, True),
    ]
    data, dead = offered(READ_COMMITTED, log, [AbortedTxn(7, 3, 5)])
    assert data == [(0, 0), (1, 1), (2, 2)]
    assert dead == [(3, 4)]


def test_aborted_records_are_archived_undelivered_and_spso_moves_past_them() -> None:
    sp = SharePartition(CFG, 0)
    data, dead = offered(READ_COMMITTED, LOG, ABORTED)
    got, eff = sp.acquire(0, "a", data, 100, fetched_end=11, aborted=dead)
    assert got == [Acquired(0, 1, 1), Acquired(4, 4, 1), Acquired(8, 9, 1)]
    # The write records the aborted offsets as ARCHIVED with no delivery; markers (6, 7, 10) are not there.
    assert writes(eff) == [
        StateWrite(0, 0, 0, (
            StateBatch(0, 1, AVAILABLE, 1), StateBatch(2, 3, ARCHIVED, 0), StateBatch(4, 4, AVAILABLE, 1),
            StateBatch(5, 5, ARCHIVED, 0), StateBatch(8, 9, AVAILABLE, 1),
        )),
    ]  # fmt: skip
    assert sp.end_offset == 11
    err, eff = sp.acknowledge(1, "a", [AckBatch(0, 1, (ACCEPT,)), AckBatch(4, 4, (ACCEPT,)), AckBatch(8, 9, (ACCEPT,))])
    assert err == 0
    assert sp.start_offset == 11 and not sp.inflight
    # Nothing is left to deliver: the aborted records never come.
    assert sp.acquire(2, "b", [], 100, fetched_end=11)[0] == []


def test_a_leading_aborted_transaction_moves_spso_at_once() -> None:
    sp = SharePartition(CFG, 2)
    got, eff = sp.acquire(0, "a", [], 100, fetched_end=6, aborted=[(2, 3), (5, 5)])
    assert got == []
    assert sp.start_offset == 6 and sp.end_offset == 6 and not sp.inflight
    assert writes(eff) == [StateWrite(0, 0, 6, ())]


def test_aborted_records_take_nothing_of_max_records() -> None:
    sp = SharePartition(CFG, 0)
    got, _ = sp.acquire(0, "a", [(0, 1), (4, 4)], 3, fetched_end=6, aborted=[(2, 3)])
    assert got == [Acquired(0, 1, 1), Acquired(4, 4, 1)]


def test_available_records_of_an_aborted_transaction_are_archived_once_read_committed() -> None:
    """Records acquired while the group read uncommitted, released, then read under read_committed."""
    sp = SharePartition(CFG, 0)
    sp.acquire(0, "a", [(0, 3)], 100, fetched_end=4)
    assert sp.acknowledge(1, "a", [AckBatch(0, 3, (RELEASE,))])[0] == 0
    got, eff = sp.acquire(2, "b", [(0, 1)], 100, fetched_end=4, aborted=[(2, 3)])
    assert got == [Acquired(0, 1, 2)]
    assert writes(eff)[0].batches == (StateBatch(0, 1, AVAILABLE, 2), StateBatch(2, 3, ARCHIVED, 1))


def test_the_in_flight_limit_stops_archiving_short_and_the_rest_comes_next_time() -> None:
    sp = SharePartition(SharePartitionConfig(max_record_locks=3), 0)
    got, _ = sp.acquire(0, "a", [(0, 2)], 100, fetched_end=10, aborted=[(3, 9)])
    assert got == [Acquired(0, 2, 1)] and sp.end_offset == 3  # the limit: nothing of the aborted range yet
    assert sp.acknowledge(1, "a", [AckBatch(0, 2, (ACCEPT,))])[0] == 0
    got, _ = sp.acquire(2, "a", [], 100, fetched_end=10, aborted=[(3, 9)])
    assert got == [] and sp.start_offset == 10


def test_a_rebuilt_partition_keeps_aborted_records_archived() -> None:
    state = PartitionState(1, 0, 0, (StateBatch(0, 1, AVAILABLE, 1), StateBatch(2, 3, ARCHIVED, 0)))
    sp, _ = SharePartition.from_state(CFG, state, 1)
    got, _ = sp.acquire(0, "a", [(0, 1), (2, 3)], 100, fetched_end=4)
    assert got == [Acquired(0, 1, 2)]  # 2-3 stay archived, whatever the next read offers
