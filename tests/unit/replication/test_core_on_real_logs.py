"""The sans-IO partition core driving real PartitionLogs: KIP-101 Scenario 2 on disk, byte for byte."""

from __future__ import annotations

from pathlib import Path

from epochlog.codes import Err
from epochlog.protocol.record_batch import iter_batches
from epochlog.protocol.records import build_batch
from epochlog.replication.partition import PartitionReplica
from epochlog.replication.types import FetchOutcome, FetchResponse, PartitionState, Role
from epochlog.storage.config import LogConfig
from epochlog.storage.partition_log import PartitionLog
from epochlog.storage.replica_log import PartitionReplicaLog


def replica(tmp: Path, bid: int) -> PartitionReplica:
    plog = PartitionLog.open(tmp / f"b{bid}" / "t-0", "t", 0, LogConfig(), recover=False)
    return PartitionReplica(bid, "t", 0, PartitionReplicaLog(plog))


def fetch(follower: PartitionReplica, leader: PartitionReplica, now: int = 0) -> FetchOutcome:
    req = follower.next_fetch()
    assert req is not None
    decision, proposal = leader.handle_fetch(req, now)
    assert proposal is None or proposal.new_isr
    data = leader.log.read(decision.read_from, 1 << 20) if decision.read_from >= 0 else None  # type: ignore[attr-defined]
    resp = FetchResponse(decision.error, decision.high_watermark, decision.diverging, data, leader.leader_epoch)
    return follower.handle_fetch_response(resp)


def batch(value: bytes) -> bytes:
    return build_batch([(None, value)])


def state(leader: int, epoch: int) -> PartitionState:
    return PartitionState(leader, epoch, frozenset({1, 2}), (1, 2), epoch)


def test_divergence_is_reconciled_on_real_segments(tmp_path: Path) -> None:
    a, b = replica(tmp_path, 1), replica(tmp_path, 2)
    a.apply_state(state(1, 0), 0)
    b.apply_state(state(1, 0), 0)
    a.append(batch(b"m1"), 0)
    assert fetch(b, a) == FetchOutcome.APPENDED and fetch(b, a) == FetchOutcome.APPENDED
    assert a.high_watermark == 1 and b.high_watermark == 1
    # A takes m2 that B never fetches; then B leads at epoch 1 and takes m3 at the same offset.
    a.append(batch(b"m2"), 0)
    b.apply_state(state(2, 1), 0)
    b.append(batch(b"m3"), 0)
    a.apply_state(state(2, 1), 0)
    assert a.role is Role.FOLLOWER
    assert fetch(a, b) == FetchOutcome.TRUNCATED  # DivergingEpoch(0, 1): A drops m2
    assert a.log.log_end_offset == 1
    assert fetch(a, b) == FetchOutcome.APPENDED
    assert fetch(a, b) == FetchOutcome.APPENDED
    logs = []
    for r in (a, b):
        plog = r.log.log  # type: ignore[attr-defined]
        data = b"".join(plog.read(0, 1 << 20).chunks)
        logs.append(
            [(h.base_offset, h.partition_leader_epoch, data[p + 61 : p + h.size]) for p, h in iter_batches(data)]
        )
    assert logs[0] == logs[1]
    assert [(o, e) for o, e, _ in logs[0]] == [(0, 0), (1, 1)]
    epochs = (tmp_path / "b1" / "t-0" / "leader-epoch-checkpoint").read_text().split()
    assert epochs == ["0", "2", "0", "0", "1", "1"]


def test_stale_follower_fetch_is_fenced(tmp_path: Path) -> None:
    a, b = replica(tmp_path, 1), replica(tmp_path, 2)
    a.apply_state(state(1, 3), 0)
    b.apply_state(state(1, 2), 0)
    assert fetch(b, a) == FetchOutcome.FENCED
    req = b.next_fetch()
    assert req is not None
    decision, _ = a.handle_fetch(req, 0)
    assert decision.error == Err.FENCED_LEADER_EPOCH


def test_an_epoch_led_without_appending_does_not_trap_the_follower(tmp_path: Path) -> None:
    """B leads epoch 1 for a moment and appends nothing; A, which never saw epoch 1, leads epoch 2. B's
    LastFetchedEpoch is 1, A answers DivergingEpoch(0, 1) at B's own log end: B must drop its empty epoch
    and go on replicating (on real segments this once looped forever; the simulator's log was right)."""
    a, b = replica(tmp_path, 1), replica(tmp_path, 2)
    a.apply_state(state(1, 0), 0)
    b.apply_state(state(1, 0), 0)
    a.append(batch(b"m1"), 0)
    assert fetch(b, a) == FetchOutcome.APPENDED
    b.apply_state(state(2, 1), 0)  # B leads epoch 1: its cache gets (1, 1), no record follows
    a.apply_state(state(1, 2), 0)  # A leads epoch 2 without ever following epoch 1
    b.apply_state(state(1, 2), 0)
    a.append(batch(b"m2"), 0)
    outcomes = [fetch(b, a) for _ in range(4)]
    assert outcomes[0] == FetchOutcome.TRUNCATED and FetchOutcome.APPENDED in outcomes[1:]
    assert b.log.log_end_offset == a.log.log_end_offset == 2


def test_a_follower_restarted_past_the_leaders_log_start_takes_that_offset_as_its_hw(tmp_path: Path) -> None:
    """OFFSET_OUT_OF_RANGE below the leader's log start: the core empties the log, starts it there and
    takes that offset as its HW; an answer to an older position is dropped first."""
    f = replica(tmp_path, 2)
    f.become_follower(state(1, 0))
    stale = FetchResponse(1, 600, log_start_offset=500, asked_epoch=0, asked_offset=7)
    assert f.handle_fetch_response(stale) == FetchOutcome.STALE and f.log.log_end_offset == 0
    resp = FetchResponse(1, 600, log_start_offset=500, asked_epoch=0, asked_offset=0)
    assert f.handle_fetch_response(resp) == FetchOutcome.RESTARTED
    assert f.high_watermark == 500 == f.log.log_end_offset == f.log.log_start_offset
    assert f.handle_fetch_response(FetchResponse(0, 600, asked_epoch=-5, asked_offset=500)) == FetchOutcome.STALE
