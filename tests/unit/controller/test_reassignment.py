"""The controller core's reassignment decisions (KIP-455): start, catch-up, completion, leader moves,
cancel, validation, and that a controller replaying the log continues a reassignment."""

from __future__ import annotations

from epochlog.codes import Err
from epochlog.controller.controller import Controller
from epochlog.controller.reassignment import replica_list_problem
from epochlog.controller.records import PartitionChange, from_json, to_json
from epochlog.replication.types import AlterIsr, PartitionState


def cluster(brokers: int = 4, rf: int = 3) -> Controller:
    c = Controller(session_timeout_ms=1000)
    for b in range(1, brokers + 1):
        c.register_broker(b, 0)
    c.create_topic("t", 1, rf)  # replicas (1, 2, 3) when rf=3
    return c


def st(c: Controller) -> PartitionState:
    return c.topics["t"].partitions[0]


def join_isr(c: Controller, broker: int) -> tuple[int, PartitionState | None]:
    s = st(c)
    return c.alter_partition(AlterIsr("t", 0, s.leader, s.leader_epoch, s.isr | {broker}, s.partition_epoch))


def test_start_adds_target_replicas_before_removing_any() -> None:
    c = cluster()
    before = st(c)
    assert c.alter_reassignment("t", 0, [2, 3, 4]) == (0, None)
    s = st(c)
    assert s.replicas == (2, 3, 4, 1)
    assert (s.adding, s.removing) == ((4,), (1,))
    assert s.isr == before.isr and s.leader == 1
    assert s.leader_epoch == before.leader_epoch  # nothing left yet: no replica to fence
    assert s.partition_epoch == before.partition_epoch + 1


def test_completes_only_once_every_target_replica_is_in_sync_and_moves_the_leader() -> None:
    c = cluster()
    c.alter_reassignment("t", 0, [2, 3, 4])
    assert c.reassigning(None) == [("t", 0, st(c))]
    epoch = st(c).leader_epoch
    code, answered = join_isr(c, 4)
    assert code == 0
    s = st(c)
    assert s.replicas == (2, 3, 4) and s.isr == frozenset({2, 3, 4})
    assert (s.adding, s.removing) == ((), ())
    assert s.leader == 2 and s.leader_epoch == epoch + 1  # the leader left: the next target replica in sync
    assert answered == s  # the old leader's AlterPartition answer carries the final state
    assert c.reassigning(None) == []


def test_lagging_target_replica_holds_completion() -> None:
    c = cluster(brokers=5)
    c.alter_reassignment("t", 0, [3, 4, 5])
    join_isr(c, 4)
    s = st(c)
    assert (s.adding, s.removing) == ((4, 5), (1, 2))  # 5 is not in sync yet: nobody leaves
    assert s.isr == frozenset({1, 2, 3, 4}) and s.leader == 1


def test_leader_that_stays_keeps_leading_and_removed_follower_is_fenced_by_a_new_epoch() -> None:
    c = cluster()
    c.alter_reassignment("t", 0, [1, 2, 4])
    epoch = st(c).leader_epoch
    join_isr(c, 4)
    s = st(c)
    assert s.replicas == (1, 2, 4) and s.leader == 1 and s.isr == frozenset({1, 2, 4})
    assert s.leader_epoch == epoch + 1


def test_pure_removal_completes_at_once() -> None:
    c = cluster()
    assert c.alter_reassignment("t", 0, [2, 3]) == (0, None)
    s = st(c)
    assert s.replicas == (2, 3) and s.isr == frozenset({2, 3}) and s.leader == 2
    assert (s.adding, s.removing) == ((), ())


def test_pure_addition_completes_without_fencing_anyone() -> None:
    c = cluster(rf=1)  # replicas (1,)
    c.alter_reassignment("t", 0, [1, 2])
    epoch = st(c).leader_epoch
    join_isr(c, 2)
    s = st(c)
    assert s.replicas == (1, 2) and s.leader == 1 and s.leader_epoch == epoch


def test_cancel_reverts_to_the_original_replicas() -> None:
    c = cluster()
    c.alter_reassignment("t", 0, [2, 3, 4])
    assert c.alter_reassignment("t", 0, None) == (0, None)
    s = st(c)
    # The original set, in the merged list's order (Kafka's revert keeps that order too).
    assert s.replicas == (2, 3, 1) and (s.adding, s.removing) == ((), ()) and s.leader == 1
    assert 4 not in s.isr


def test_cancel_after_a_joining_replica_caught_up_drops_it_from_the_isr() -> None:
    c = cluster(brokers=5)
    c.alter_reassignment("t", 0, [3, 4, 5])
    join_isr(c, 4)
    epoch = st(c).leader_epoch
    c.alter_reassignment("t", 0, None)
    s = st(c)
    assert set(s.replicas) == {1, 2, 3} and s.isr == frozenset({1, 2, 3})
    assert s.leader_epoch == epoch + 1  # replicas 4 and 5 left: their fetches must be fenced


def test_cancel_without_reassignment_is_refused() -> None:
    c = cluster()
    n = len(c.records)
    assert c.alter_reassignment("t", 0, None)[0] == Err.NO_REASSIGNMENT_IN_PROGRESS
    assert len(c.records) == n


def test_new_target_mid_reassignment_starts_over_from_the_original() -> None:
    c = cluster(brokers=5)
    c.alter_reassignment("t", 0, [2, 3, 4])
    c.alter_reassignment("t", 0, [1, 2, 5])
    s = st(c)
    assert s.replicas == (1, 2, 5, 3) and (s.adding, s.removing) == ((5,), (3,))
    assert 4 not in s.isr


def test_bad_targets_change_nothing() -> None:
    c = cluster()
    n, before = len(c.records), st(c)
    assert c.alter_reassignment("t", 0, [1, 1, 2])[0] == Err.INVALID_REPLICA_ASSIGNMENT
    assert c.alter_reassignment("t", 0, [1, 2, 9])[0] == Err.INVALID_REPLICA_ASSIGNMENT
    assert c.alter_reassignment("t", 0, [])[0] == Err.INVALID_REPLICA_ASSIGNMENT
    assert c.alter_reassignment("t", 7, [1, 2, 3])[0] == Err.UNKNOWN_TOPIC_OR_PARTITION
    assert c.alter_reassignment("nope", 0, [1, 2, 3])[0] == Err.UNKNOWN_TOPIC_OR_PARTITION
    assert len(c.records) == n and st(c) == before


def test_replica_list_problems_name_the_broker() -> None:
    assert replica_list_problem([1, 2], {1, 2}) is None
    assert "more than once" in (replica_list_problem([2, 2], {2}) or "")
    assert "broker 7" in (replica_list_problem([1, 7], {1}) or "")


def test_a_replayed_controller_continues_the_reassignment() -> None:
    c = cluster()
    c.alter_reassignment("t", 0, [2, 3, 4])
    stored = [from_json(*to_json(r)) for r in c.records]  # through the metadata log's JSON form
    assert any(isinstance(r, PartitionChange) and r.adding_replicas == (4,) for r in stored)
    c2 = Controller.replay(stored, 1000, now_ms=0)
    assert (st(c2).adding, st(c2).removing) == ((4,), (1,))
    c2.activate(0)
    join_isr(c2, 4)
    assert st(c2).replicas == (2, 3, 4) and st(c2).leader == 2


def test_snapshot_keeps_the_reassignment() -> None:
    c = cluster()
    c.alter_reassignment("t", 0, [2, 3, 4])
    c2 = Controller.replay(c.snapshot_records(), 1000)
    assert (st(c2).adding, st(c2).removing) == ((4,), (1,))


def test_isr_changes_during_a_reassignment_keep_it_going() -> None:
    c = cluster()
    c.alter_reassignment("t", 0, [2, 3, 4])
    c.fence(3)  # an ISR shrink decided elsewhere must not forget the reassignment
    s = st(c)
    assert 3 not in s.isr and (s.adding, s.removing) == ((4,), (1,))


def test_new_partitions_take_the_target_replication_factor_not_the_merged_one() -> None:
    c = cluster(brokers=5)
    c.alter_reassignment("t", 0, [3, 4, 5])  # replicas (3, 4, 5, 1, 2) while moving
    c.add_partitions("t", 2)
    assert len(c.topics["t"].partitions[1].replicas) == 3


def test_cancel_moves_leadership_off_a_joining_replica() -> None:
    c = cluster(brokers=5)
    c.alter_reassignment("t", 0, [4, 5, 1])
    join_isr(c, 4)  # 5 is still catching up: the move goes on
    assert c.elect_leader("t", 0, 4) and st(c).leader == 4
    c.alter_reassignment("t", 0, None)
    s = st(c)
    assert set(s.replicas) == {1, 2, 3} and s.leader in (1, 2, 3) and s.leader in s.isr
    assert 4 not in s.isr and (s.adding, s.removing) == ((), ())


def test_replication_factor_change_refused_when_not_allowed() -> None:

    c = cluster()
    n = len(c.records)
    assert c.alter_reassignment("t", 0, [2, 3], allow_rf_change=False)[0] == Err.INVALID_REPLICATION_FACTOR
    assert len(c.records) == n
    assert c.alter_reassignment("t", 0, [2, 3, 4], allow_rf_change=False) == (0, None)


def test_a_fenced_joining_replica_cannot_complete_the_move() -> None:
    c = cluster()
    c.alter_reassignment("t", 0, [4])
    c.fence(4)  # 4 joins the ISR, then its broker is fenced before the move completes
    s = st(c)
    code, _ = c.alter_partition(AlterIsr("t", 0, s.leader, s.leader_epoch, s.isr | {4}, s.partition_epoch))
    assert code != 0  # a fenced broker never joins the ISR (KIP-320)
    assert (st(c).adding, st(c).removing) == ((4,), (1, 2, 3)) and st(c).leader == 1
