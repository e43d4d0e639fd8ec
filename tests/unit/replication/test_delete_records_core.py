"""DeleteRecords in the partition core, on real PartitionLogs: the leader's rules, followers following its
log start offset from fetch answers, and the wait for every live replica."""

from __future__ import annotations

from pathlib import Path

from epochlog.codes import Err
from epochlog.protocol.records import build_batch
from epochlog.replication.partition import PartitionReplica
from epochlog.replication.types import FetchOutcome, FetchRequest, FetchResponse, PartitionState
from epochlog.storage.config import LogConfig
from epochlog.storage.partition_log import PartitionLog
from epochlog.storage.replica_log import PartitionReplicaLog

STATE = PartitionState(1, 0, frozenset({1, 2}), (1, 2), 0)


def replica(tmp: Path, bid: int) -> PartitionReplica:
    plog = PartitionLog.open(tmp / f"b{bid}" / "t-0", "t", 0, LogConfig(segment_bytes=1000), recover=False)
    r = PartitionReplica(bid, "t", 0, PartitionReplicaLog(plog))
    r.apply_state(STATE, 0)
    return r


def fetch(follower: PartitionReplica, leader: PartitionReplica) -> FetchOutcome:
    """One round trip, carrying the log start offsets both ways as the wire does."""
    req = follower.next_fetch()
    assert req is not None
    req = FetchRequest(
        req.replica_id,
        req.fetch_offset,
        req.last_fetched_epoch,
        req.current_leader_epoch,
        follower.log.log_start_offset,
    )
    d, _ = leader.handle_fetch(req, 0)
    data = leader.log.read(d.read_from, 1 << 20) if d.read_from >= 0 else None  # type: ignore[attr-defined]
    resp = FetchResponse(d.error, d.high_watermark, d.diverging, data or None, log_start_offset=d.log_start_offset)
    return follower.handle_fetch_response(resp)


def pair(tmp: Path, n: int = 20) -> tuple[PartitionReplica, PartitionReplica]:
    a, b = replica(tmp, 1), replica(tmp, 2)
    for i in range(n):
        a.append(build_batch([(None, b"v%03d" % i * 40)]), 0)
    while a.high_watermark < a.log.log_end_offset or b.high_watermark < a.high_watermark:
        assert fetch(b, a) == FetchOutcome.APPENDED
    return a, b


def test_only_the_leader_deletes_and_never_at_or_past_the_hw(tmp_path: Path) -> None:
    a, b = pair(tmp_path)
    assert a.high_watermark == 20
    assert b.delete_records(5) == (Err.NOT_LEADER_OR_FOLLOWER, -1)
    assert a.delete_records(21) == (Err.OFFSET_OUT_OF_RANGE, -1)
    assert a.delete_records(-2) == (Err.OFFSET_OUT_OF_RANGE, -1)
    assert a.log.log_start_offset == 0
    assert a.delete_records(7) == (Err.NONE, 7)
    assert a.log.log_start_offset == 7
    assert a.delete_records(3) == (Err.NONE, 3), "an offset below the start is done already"
    assert a.log.log_start_offset == 7
    assert a.delete_records(-1) == (Err.NONE, 20), "-1 is the high watermark"
    assert a.log.log_start_offset == 20


def test_a_hw_that_lags_the_log_end_bounds_what_can_be_deleted(tmp_path: Path) -> None:
    a, _b = pair(tmp_path)
    a.append(build_batch([(None, b"not replicated")]), 0)
    assert a.log.log_end_offset == 21 and a.high_watermark == 20
    assert a.delete_records(21)[0] == Err.OFFSET_OUT_OF_RANGE
    assert a.delete_records(-1) == (Err.NONE, 20)


def test_the_follower_follows_and_the_answer_waits_for_it(tmp_path: Path) -> None:
    a, b = pair(tmp_path)
    assert fetch(b, a) == FetchOutcome.APPENDED  # the leader now knows b starts at 0
    code, target = a.delete_records(12)
    assert (code, target) == (Err.NONE, 12)
    assert a.low_watermark() == 0
    assert a.delete_records_result(target) is None, "answered before the follower deleted"
    assert fetch(b, a) == FetchOutcome.APPENDED  # b learns the leader's start...
    assert b.log.log_start_offset == 12
    assert a.delete_records_result(target) is None
    assert fetch(b, a) == FetchOutcome.APPENDED  # ...and says so in its next fetch
    assert a.low_watermark() == 12
    assert a.delete_records_result(target) == Err.NONE


def test_a_replica_on_a_dead_broker_is_not_waited_for(tmp_path: Path) -> None:
    a, _b = pair(tmp_path)
    _code, target = a.delete_records(10)
    assert a.delete_records_result(target) is None
    a.ineligible = frozenset({2})
    assert a.delete_records_result(target) == Err.NONE
    a.apply_state(PartitionState(2, 1, frozenset({1, 2}), (1, 2), 1), 0)
    assert a.delete_records_result(target) == Err.NOT_LEADER_OR_FOLLOWER
