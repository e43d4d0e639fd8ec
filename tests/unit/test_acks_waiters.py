"""acks=all waiters of a served partition (server/partition.py) on the real core and real logs: each is
answered once the HW passes its last offset, in offset order, and every one fails when leadership goes."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

from epochlog.protocol.errors import Err
from epochlog.protocol.records import build_batch
from epochlog.replication.partition import PartitionReplica
from epochlog.replication.types import FetchRequest, PartitionState
from epochlog.server.partition import Partition
from epochlog.storage.config import LogConfig
from epochlog.storage.partition_log import PartitionLog
from epochlog.storage.replica_log import PartitionReplicaLog


def _leader(tmp: Path, min_isr: int = 2) -> Partition:
    plog = PartitionLog.open(tmp / "t-0", "t", 0, LogConfig(), recover=False)
    core = PartitionReplica(1, "t", 0, PartitionReplicaLog(plog), min_insync_replicas=min_isr)
    core.apply_state(PartitionState(1, 0, frozenset({1, 2}), (1, 2), 0), 0)
    return Partition("t", 0, uuid.uuid4(), plog, core)


def _append(part: Partition, n: int) -> int:
    """n single-record batches; the last offset written."""
    assert part.replica is not None
    last = -1
    for i in range(n):
        appended = part.append(build_batch([(None, b"v%d" % i)]), 0)
        assert appended.error == Err.NONE
        last = appended.wait_offset
    return last


def _follower_at(part: Partition, offset: int) -> None:
    """The follower fetches from ``offset``: the leader learns its log end and moves the HW."""
    assert part.replica is not None
    part.replica.handle_fetch(FetchRequest(2, offset, 0, 0), 0)
    part.sync()


def test_waiters_are_answered_in_order_as_the_hw_passes_them(tmp_path: Path) -> None:
    async def go() -> None:
        part = _leader(tmp_path)
        lasts = [_append(part, 2) for _ in range(4)]  # last offsets 1, 3, 5, 7
        futs = [part.wait_committed(last) for last in lasts]
        _follower_at(part, 4)  # HW 4: offsets 1 and 3 are committed
        assert [f.done() for f in futs] == [True, True, False, False]
        assert [f.result() for f in futs[:2]] == [Err.NONE, Err.NONE]
        futs[2].cancel()  # a request that timed out: dropped, it does not hold the next one up
        _follower_at(part, 8)
        assert futs[3].done() and futs[3].result() == Err.NONE
        assert part.acks_waiters == []

    asyncio.run(go())


def test_a_late_registration_of_a_lower_offset_is_not_stuck_behind_a_higher_one(tmp_path: Path) -> None:
    async def go() -> None:
        part = _leader(tmp_path)
        first = _append(part, 1)
        second = _append(part, 1)
        high = part.wait_committed(second)
        low = part.wait_committed(first)  # registered second, for the lower offset
        _follower_at(part, first + 1)
        assert low.done() and low.result() == Err.NONE
        assert not high.done()

    asyncio.run(go())


def test_below_min_isr_the_answer_is_not_enough_replicas_after_append(tmp_path: Path) -> None:
    async def go() -> None:
        part = _leader(tmp_path, min_isr=2)
        fut = part.wait_committed(_append(part, 1))
        assert not fut.done()
        # The ISR shrinks to the leader alone after the append: the HW passes the record at once, but
        # fewer than min.insync.replicas hold it.
        assert part.replica is not None
        part.replica.apply_state(PartitionState(1, 0, frozenset({1}), (1, 2), 1), 0)
        part.sync()
        assert fut.done() and fut.result() == Err.NOT_ENOUGH_REPLICAS_AFTER_APPEND

    asyncio.run(go())


def test_every_waiter_fails_when_leadership_moves(tmp_path: Path) -> None:
    async def go() -> None:
        part = _leader(tmp_path)
        futs = [part.wait_committed(_append(part, 1)) for _ in range(3)]
        assert part.replica is not None
        part.replica.apply_state(PartitionState(2, 1, frozenset({1, 2}), (1, 2), 1), 0)
        part.sync()
        assert [f.result() for f in futs] == [Err.NOT_LEADER_OR_FOLLOWER] * 3
        assert part.acks_waiters == []

    asyncio.run(go())
