"""The partition core's decisions, on the simulator's in-memory log."""

from __future__ import annotations

from epochlog.codes import Err
from epochlog.replication.partition import PartitionReplica
from epochlog.replication.types import FetchOutcome, FetchRequest, PartitionState
from epochlog.sim.disk_log import SimLog


def leader(isr: frozenset[int] = frozenset({1, 2}), min_isr: int = 1, epoch: int = 0) -> PartitionReplica:
    r = PartitionReplica(1, "t", 0, SimLog(), min_insync_replicas=min_isr, replica_lag_time_max_ms=100)
    r.apply_state(PartitionState(1, epoch, isr, (1, 2), 0), 0)
    return r


def test_become_leader_records_epoch_at_log_end() -> None:
    r = leader(epoch=4)
    assert r.log.end_offset_for(4) == (4, 0)
    assert r.log.latest_epoch() == 4


def test_produce_checks() -> None:
    r = leader(isr=frozenset({1}), min_isr=2)
    assert r.check_produce(-1, 0) == Err.NOT_ENOUGH_REPLICAS
    assert r.check_produce(1, 0) == Err.NONE
    assert r.check_produce(1, 0, producer_epoch=0) == Err.NONE
    r2 = leader(epoch=3)
    assert r2.check_produce(1, 0, producer_epoch=2) == Err.FENCED_LEADER_EPOCH  # KIP-359
    assert r2.check_produce(1, 0, producer_epoch=4) == Err.UNKNOWN_LEADER_EPOCH
    follower = PartitionReplica(2, "t", 0, SimLog())
    follower.apply_state(PartitionState(1, 0, frozenset({1, 2}), (1, 2), 0), 0)
    assert follower.check_produce(1, 0) == Err.NOT_LEADER_OR_FOLLOWER


def test_hw_waits_for_isr_and_new_leader_answers_offset_not_available() -> None:
    r = leader()
    r.append(["a"], 0)
    r.append(["b"], 0)
    assert r.high_watermark == 0
    assert r.handle_fetch(FetchRequest(-1, 1, -1, -1), 0)[0].error == Err.OFFSET_NOT_AVAILABLE
    decision, _ = r.handle_fetch(FetchRequest(2, 2, 0, 0), 10)
    assert decision.error == Err.NONE and r.high_watermark == 2
    consumer = r.handle_fetch(FetchRequest(-1, 1, 0, -1), 10)[0]
    assert consumer.error == Err.NONE and consumer.read_to == 2  # a consumer reads to the HW, not the log end


def test_isr_shrinks_after_lag_and_rejoins_when_caught_up() -> None:
    r = leader()
    r.append(["a"], 0)
    assert r.maybe_shrink_isr(50) is None
    proposal = r.maybe_shrink_isr(500)
    assert proposal is not None and proposal.new_isr == frozenset({1})
    r.apply_state(PartitionState(1, 0, frozenset({1}), (1, 2), 1), 500)
    assert r.high_watermark == 1  # the leader alone is the ISR now
    _, expand = r.handle_fetch(FetchRequest(2, 1, 0, 0), 600)
    assert expand is not None and expand.new_isr == frozenset({1, 2})


def test_fenced_or_shutting_down_follower_is_not_proposed_for_the_isr() -> None:
    """KIP-841: a caught-up follower the metadata shows fenced is not proposed; the controller would refuse
    it, and while the proposal was in flight the HW would wait for that follower too."""
    r = leader()
    r.append(["a"], 0)
    r.apply_state(PartitionState(1, 0, frozenset({1}), (1, 2), 1), 500)
    r.ineligible = frozenset({2})
    _, expand = r.handle_fetch(FetchRequest(2, 1, 0, 0), 600)
    assert expand is None and r.pending_isr is None
    r.ineligible = frozenset()
    _, expand = r.handle_fetch(FetchRequest(2, 1, 0, 0), 700)
    assert expand is not None and expand.new_isr == frozenset({1, 2})


def test_divergence_answer() -> None:
    r = leader(epoch=0)
    r.append(["a"], 0)
    r.apply_state(PartitionState(1, 2, frozenset({1, 2}), (1, 2), 1), 0)
    r.append(["b"], 0)
    decision, _ = r.handle_fetch(FetchRequest(2, 3, 1, 2), 0)  # follower claims epoch 1 up to offset 3
    assert decision.diverging is not None
    assert (decision.diverging.epoch, decision.diverging.end_offset) == (0, 1)
    assert r.offset_for_leader_epoch(2, 0) == (Err.NONE, 0, 1)
    assert r.offset_for_leader_epoch(1, 0)[0] == Err.FENCED_LEADER_EPOCH


def _reconcile(follower: PartitionReplica, leader: PartitionReplica, rounds: int = 10) -> list[FetchOutcome]:
    """Fetch until the follower has the leader's log end; returns what each round did."""
    from epochlog.replication.types import FetchResponse

    outcomes = []
    for _ in range(rounds):
        req = follower.next_fetch()
        assert req is not None
        decision, _ = leader.handle_fetch(req, 0)
        batches = leader.log.read(decision.read_from, 100) if decision.read_from >= 0 else None
        outcomes.append(
            follower.handle_fetch_response(
                FetchResponse(decision.error, decision.high_watermark, decision.diverging, batches, leader.leader_epoch)
            )
        )
        if follower.log.log_end_offset == leader.log.log_end_offset and outcomes[-1] == FetchOutcome.APPENDED:
            break
    return outcomes


def test_a_follower_without_the_leaders_epoch_steps_back_to_its_own_earlier_epoch() -> None:
    """Kafka's follower rule (KIP-279): when the leader's diverging epoch is one the follower never had,
    the follower truncates to the end of its own largest epoch below it and asks again. F led epoch 2
    from offset 40 without ever holding epoch 1 (40..59 on C); C, elected at epoch 3, answers (1, 60).
    Truncating to 60 would keep F's own 40..59 from epoch 2, which C never had."""
    c_log, f_log = SimLog(), SimLog()
    c_log.append_as_leader([f"e0-{i}" for i in range(40)], 0, 0)
    f_log.append_as_leader([f"e0-{i}" for i in range(40)], 0, 0)
    c_log.append_as_leader([f"e1-{i}" for i in range(20)], 1, 0)
    f_log.append_as_leader([f"e2-{i}" for i in range(40)], 2, 0)
    c = PartitionReplica(3, "t", 0, c_log)
    c.apply_state(PartitionState(3, 3, frozenset({3}), (2, 3), 5), 0)
    c.append(["e3-0", "e3-1"], 0)
    f = PartitionReplica(2, "t", 0, f_log)
    f.apply_state(PartitionState(3, 3, frozenset({3}), (2, 3), 5), 0)
    outcomes = _reconcile(f, c)
    assert outcomes[0] == FetchOutcome.TRUNCATED and f_log.truncations[0] == 40
    assert [(e.epoch, e.value) for e in f_log.entries] == [(e.epoch, e.value) for e in c_log.entries]
    assert f_log.end_offset_for(3) == c_log.end_offset_for(3)


def test_sole_isr_member_taking_leadership_commits_its_log_at_once() -> None:
    """A restarted RF=1 leader (or one whose ISR shrank to itself before it took over) holds the whole ISR:
    its log end is the HW, without waiting for a write. With followers in the ISR it must wait."""
    log = SimLog()
    r = PartitionReplica(1, "t", 0, log)
    r.apply_state(PartitionState(1, 0, frozenset({1}), (1,), 0), 0)
    r.append(["a"], 0)
    r.append(["b"], 0)
    restarted = PartitionReplica(1, "t", 0, log)  # same log, HW forgotten (checkpoint lag)
    restarted.apply_state(PartitionState(1, 1, frozenset({1}), (1,), 1), 0)
    assert restarted.high_watermark == 2
    shared = PartitionReplica(1, "t", 0, log)
    shared.apply_state(PartitionState(1, 2, frozenset({1, 2}), (1, 2), 2), 0)
    assert shared.high_watermark == 0


def test_consumer_fetch_decisions_are_the_cores() -> None:
    """Fencing, divergence (KIP-320 consumers send their last fetched epoch too), range and the HW bound."""
    r = leader(isr=frozenset({1}), epoch=0)
    r.append(["a"], 0)
    r.append(["b"], 0)
    r.apply_state(PartitionState(1, 2, frozenset({1}), (1, 2), 1), 0)  # a new term starts at offset 2
    r.append(["c"], 0)
    assert r.handle_fetch(FetchRequest(-1, 0, -1, 1), 0)[0].error == Err.FENCED_LEADER_EPOCH
    assert r.handle_fetch(FetchRequest(-1, 0, -1, 3), 0)[0].error == Err.UNKNOWN_LEADER_EPOCH
    d = r.handle_fetch(FetchRequest(-1, 3, 1, 2), 0)[0]  # epoch 1 never had records; epoch 0 ended at 2
    assert d.diverging is not None and (d.diverging.epoch, d.diverging.end_offset) == (0, 2)
    assert r.handle_fetch(FetchRequest(-1, 4, -1, -1), 0)[0].error == Err.OFFSET_OUT_OF_RANGE
    ok = r.handle_fetch(FetchRequest(-1, 1, 0, 2), 0)[0]
    assert ok.error == Err.NONE and (ok.read_from, ok.read_to) == (1, 3)
