"""The share-partition core: acquisition locks, ACCEPT/RELEASE/REJECT, lock timeouts, the delivery-count limit,
SPSO/SPEO, the in-flight bound, Kafka's error codes, and the state writes a failed-over leader rebuilds from."""

from __future__ import annotations

import pytest

from epochlog.codes import Err
from epochlog.groups.share.messages import AckBatch, Acquired, RecordsAvailable, StateWrite, WakeAt
from epochlog.groups.share.model import (
    ACCEPT,
    ACKNOWLEDGED,
    ARCHIVED,
    AVAILABLE,
    GAP,
    REJECT,
    RELEASE,
    SharePartitionConfig,
)
from epochlog.groups.share.partition import SharePartition
from epochlog.groups.share.records import PartitionState, ShareStateStore, StateBatch

pytestmark = pytest.mark.unit

CFG = SharePartitionConfig(record_lock_duration_ms=1000, delivery_count_limit=3, max_record_locks=100)
KEY = ("g", "t", 0)


def part(cfg: SharePartitionConfig = CFG, start: int = 0) -> SharePartition:
    return SharePartition(cfg, start)


def writes(effects: list) -> list[StateWrite]:
    return [e for e in effects if isinstance(e, StateWrite)]


def test_new_partition_starts_at_auto_offset_reset() -> None:
    sp, eff = SharePartition.create(CFG, 5, 40)
    assert (sp.start_offset, sp.end_offset) == (40, 40)  # latest, Kafka's default
    assert eff == [StateWrite(0, 0, 40, ())]
    sp, _ = SharePartition.create(SharePartitionConfig(auto_offset_reset="earliest"), 5, 40)
    assert sp.start_offset == 5
    with pytest.raises(ValueError):
        SharePartition.create(SharePartitionConfig(auto_offset_reset="none"), 5, 40)
    # Existing state wins over the reset policy.
    sp, _ = SharePartition.create(CFG, 5, 40, PartitionState(start_offset=12))
    assert sp.start_offset == 12


def test_acquire_locks_for_one_member_only() -> None:
    sp = part()
    got, eff = sp.acquire(0, "a", [(0, 9)], 500)
    assert got == [Acquired(0, 9, 1)]
    assert sp.end_offset == 10 and sp.start_offset == 0
    assert writes(eff) == [StateWrite(0, 0, 0, (StateBatch(0, 9, AVAILABLE, 1),))]
    assert WakeAt(1000) in eff
    again, _ = sp.acquire(1, "b", [(0, 9)], 500)
    assert again == []
    assert sp.next_fetch_offset() == 10


def test_accept_moves_the_start_offset_and_is_never_delivered_again() -> None:
    sp = part()
    sp.acquire(0, "a", [(0, 9)], 500)
    err, eff = sp.acknowledge(1, "a", [AckBatch(0, 4, (ACCEPT,))])
    assert err == Err.NONE
    assert sp.start_offset == 5
    assert writes(eff) == [StateWrite(0, 0, 5, ())]  # everything it changed is below the new start offset
    got, _ = sp.acquire(5000, "b", [(0, 9)], 500)  # a's lock on 5..9 expired
    assert got == [Acquired(5, 9, 2)]


def test_release_redelivers_with_the_count_kept() -> None:
    sp = part()
    sp.acquire(0, "a", [(0, 3)], 500)
    err, eff = sp.acknowledge(1, "a", [AckBatch(0, 3, (RELEASE,))])
    assert err == Err.NONE and RecordsAvailable() in eff
    assert writes(eff)[0].batches == (StateBatch(0, 3, AVAILABLE, 1),)
    assert sp.next_fetch_offset() == 0
    got, _ = sp.acquire(2, "b", [(0, 3)], 500)
    assert got == [Acquired(0, 3, 2)]


def test_per_offset_types_and_max_records() -> None:
    sp = part()
    got, _ = sp.acquire(0, "a", [(0, 4), (5, 9)], 3)
    assert got == [Acquired(0, 4, 1)]  # a soft limit: the log batch is taken whole
    assert sp.end_offset == 5
    err, _ = sp.acknowledge(1, "a", [AckBatch(0, 4, (ACCEPT, REJECT, RELEASE, ACCEPT, GAP))])
    assert err == Err.NONE
    assert sp.start_offset == 2
    assert [(o, r.state) for o, r in sp.inflight.items()] == [(2, AVAILABLE), (3, ACKNOWLEDGED), (4, ARCHIVED)]
    got, _ = sp.acquire(2, "b", [(2, 9)], 2)
    assert got == [Acquired(2, 2, 2), Acquired(5, 9, 1)]


def test_reject_archives() -> None:
    sp = part()
    sp.acquire(0, "a", [(0, 1)], 500)
    assert sp.acknowledge(1, "a", [AckBatch(0, 1, (REJECT,))])[0] == Err.NONE
    assert sp.start_offset == 2 and not sp.inflight


def test_errors_are_kafkas_and_nothing_is_applied() -> None:
    sp = part()
    sp.acquire(0, "a", [(0, 9)], 500)
    sp.acquire(0, "b", [(10, 19)], 500)
    # Another member's records: INVALID_RECORD_STATE, and the valid first batch is not applied either.
    err, eff = sp.acknowledge(1, "a", [AckBatch(0, 4, (ACCEPT,)), AckBatch(10, 10, (ACCEPT,))])
    assert err == Err.INVALID_RECORD_STATE and not writes(eff)
    assert sp.start_offset == 0
    assert sp.acknowledge(1, "a", [AckBatch(0, 0, (7,))])[0] == Err.INVALID_REQUEST  # unknown type
    assert sp.acknowledge(1, "a", [AckBatch(3, 2, (ACCEPT,))])[0] == Err.INVALID_REQUEST
    assert sp.acknowledge(1, "a", [AckBatch(0, 2, (ACCEPT, ACCEPT))])[0] == Err.INVALID_REQUEST  # types count
    assert sp.acknowledge(1, "a", [AckBatch(5, 25, (ACCEPT,))])[0] == Err.INVALID_REQUEST  # past what was fetched
    # The same offset twice in one request.
    assert sp.acknowledge(1, "a", [AckBatch(0, 1, (ACCEPT,)), AckBatch(1, 1, (ACCEPT,))])[0] == Err.INVALID_RECORD_STATE
    assert sp.acknowledge(1, "a", [AckBatch(0, 9, (ACCEPT,))])[0] == Err.NONE
    # Acknowledged already: below the start offset now, so ignored as Kafka does.
    assert sp.acknowledge(1, "a", [AckBatch(0, 9, (ACCEPT,))])[0] == Err.NONE
    # An AVAILABLE record (released) cannot be acknowledged.
    sp.acknowledge(1, "b", [AckBatch(10, 10, (RELEASE,))])
    assert sp.acknowledge(1, "b", [AckBatch(10, 10, (ACCEPT,))])[0] == Err.INVALID_RECORD_STATE


def test_lock_timeout_releases_and_the_owner_can_no_longer_acknowledge() -> None:
    sp = part()
    sp.acquire(0, "a", [(0, 4)], 500)
    assert sp.tick(999) == []
    eff = sp.tick(1000)
    assert RecordsAvailable() in eff and writes(eff)[0].batches == (StateBatch(0, 4, AVAILABLE, 1),)
    assert sp.acknowledge(1001, "a", [AckBatch(0, 4, (ACCEPT,))])[0] == Err.INVALID_RECORD_STATE
    # Expiry is checked on every event, not only on tick: a late acknowledgement fails without a tick.
    sp.acquire(2000, "b", [(0, 4)], 500)
    assert sp.acknowledge(3000, "b", [AckBatch(0, 4, (ACCEPT,))])[0] == Err.INVALID_RECORD_STATE


def test_delivery_count_limit_archives() -> None:
    sp = part()  # limit 3
    for i in range(3):
        got, _ = sp.acquire(i * 10_000, f"m{i}", [(0, 1)], 500)
        assert got == [Acquired(0, 1, i + 1)]
        eff = sp.tick(i * 10_000 + 1000)
    assert not sp.inflight and sp.start_offset == 2  # archived, and the start offset moved past them
    assert writes(eff)[0].start_offset == 2
    # Released by the member at the limit: archived too.
    sp.acquire(100_000, "a", [(2, 2)], 500)
    sp.acknowledge(100_001, "a", [AckBatch(2, 2, (RELEASE,))])
    sp.acquire(100_002, "a", [(2, 2)], 500)
    sp.acknowledge(100_003, "a", [AckBatch(2, 2, (RELEASE,))])
    sp.acquire(100_004, "a", [(2, 2)], 500)
    err, eff = sp.acknowledge(100_005, "a", [AckBatch(2, 2, (RELEASE,))])
    assert err == Err.NONE and RecordsAvailable() not in eff and sp.start_offset == 3


def test_member_left_releases_only_its_records() -> None:
    sp = part()
    sp.acquire(0, "a", [(0, 4)], 500)
    sp.acquire(0, "b", [(5, 9)], 500)
    eff = sp.member_left(1, "a")
    assert writes(eff)[0].batches == (StateBatch(0, 4, AVAILABLE, 1),)
    assert sp.acknowledge(2, "b", [AckBatch(5, 9, (ACCEPT,))])[0] == Err.NONE
    assert sp.start_offset == 0 and sp.next_fetch_offset() == 0


def test_in_flight_bound_stops_new_records() -> None:
    sp = part(SharePartitionConfig(max_record_locks=10))
    got, _ = sp.acquire(0, "a", [(0, 9), (10, 19)], 500)
    assert got == [Acquired(0, 9, 1)]
    assert sp.in_flight_limit_reached()
    assert sp.acquire(0, "b", [(10, 19)], 500)[0] == []
    sp.acknowledge(1, "a", [AckBatch(0, 4, (ACCEPT,))])
    assert sp.acquire(2, "b", [(10, 19)], 500)[0] == [Acquired(10, 19, 1)]


def test_gaps_and_read_committed_ranges_are_passed_over() -> None:
    sp = part()
    # 3..4 are aborted records the driver left out; the fetch read up to 10.
    got, _ = sp.acquire(0, "a", [(0, 2), (5, 9)], 500, fetched_end=10)
    assert got == [Acquired(0, 2, 1), Acquired(5, 9, 1)]
    assert sp.acknowledge(1, "a", [AckBatch(0, 9, (ACCEPT,))])[0] == Err.NONE
    assert sp.start_offset == 10 and sp.end_offset == 10 and not sp.inflight


def test_replay_rebuilds_what_the_leader_had() -> None:
    store = ShareStateStore(updates_per_snapshot=3)
    sp = part()

    def persist(effects: list) -> None:
        for w in writes(effects):
            assert store.write(KEY, w.leader_epoch, w.state_epoch, w.start_offset, w.batches)[0] == Err.NONE

    persist(sp.acquire(0, "a", [(0, 9)], 500)[1])
    persist(sp.acquire(0, "b", [(10, 14)], 500)[1])
    persist(sp.acknowledge(1, "a", [AckBatch(0, 9, (ACCEPT, ACCEPT, REJECT, RELEASE, ACCEPT) + (ACCEPT,) * 5)])[1])
    persist(sp.tick(5000))  # b's lock expires
    persist(sp.acquire(6000, "c", [(3, 14)], 2)[1])
    st = store.states[KEY]
    assert (st.start_offset, st.batches) == sp.durable_view()
    # A new leader: c's acquisition is lost with the leader, its delivery attempt is not.
    sp2, eff = SharePartition.from_state(CFG, st, leader_epoch=1)
    assert eff == []
    assert sp2.start_offset == 3 and sp2.end_offset == 15
    got, _ = sp2.acquire(7000, "d", [(3, 14)], 500)
    assert got == [Acquired(3, 3, 3), Acquired(10, 10, 3), Acquired(11, 14, 2)]


def test_failover_archives_a_record_at_its_limit() -> None:
    st = PartitionState(0, 0, 0, (StateBatch(0, 1, AVAILABLE, 3), StateBatch(2, 2, AVAILABLE, 1)))
    sp, eff = SharePartition.from_state(CFG, st, leader_epoch=2)
    assert sp.start_offset == 2
    assert eff == [StateWrite(0, 2, 2, ())]
    assert sp.acquire(0, "a", [(0, 2)], 500)[0] == [Acquired(2, 2, 2)]
