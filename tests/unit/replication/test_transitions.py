"""partition_transitions: what a broker does with its replicas when the metadata changes, as a pure function."""

from __future__ import annotations

import pytest

from epochlog.replication.transitions import Kind, Transition, partition_transitions
from epochlog.replication.types import PartitionState

pytestmark = pytest.mark.unit

ME = 1
TP = ("t", 0)


def st(
    leader: int, epoch: int, replicas: tuple[int, ...] = (1, 2, 3), isr: tuple[int, ...] | None = None
) -> PartitionState:
    return PartitionState(leader, epoch, frozenset(replicas if isr is None else isr), replicas, epoch)


def one(before: PartitionState | None, after: PartitionState | None, hosted: bool = True) -> list[Transition]:
    b = {TP: before} if before is not None else {}
    a = {TP: after} if after is not None else {}
    return partition_transitions(ME, b, a, [TP], {TP} if hosted else set())


def test_a_new_partition_led_here_is_created_and_led() -> None:
    assert one(None, st(ME, 0), hosted=False) == [Transition(Kind.BECOME_LEADER, "t", 0, st(ME, 0), create=True)]


def test_a_new_partition_led_elsewhere_is_created_and_followed() -> None:
    assert one(None, st(2, 0), hosted=False) == [Transition(Kind.BECOME_FOLLOWER, "t", 0, st(2, 0), create=True)]


def test_a_new_leader_epoch_is_a_role_change_even_for_the_same_leader() -> None:
    # KIP-101's returning leader: re-elected, it still takes the new epoch (and writes it to its epoch cache).
    assert [t.kind for t in one(st(ME, 3), st(ME, 4))] == [Kind.BECOME_LEADER]
    assert [t.kind for t in one(st(2, 3), st(3, 4))] == [Kind.BECOME_FOLLOWER]
    assert [t.kind for t in one(st(ME, 3), st(2, 4))] == [Kind.BECOME_FOLLOWER]
    assert [t.kind for t in one(st(2, 3), st(ME, 4))] == [Kind.BECOME_LEADER]


def test_an_isr_change_within_the_term_is_an_update() -> None:
    t = one(st(ME, 3), st(ME, 3, isr=(1, 2)))
    assert [(x.kind, x.create) for x in t] == [(Kind.UPDATE, False)]
    assert t[0].state == st(ME, 3, isr=(1, 2))


def test_a_replica_that_is_not_running_here_is_created_even_within_the_term() -> None:
    # Its log could not be created the first time (a failed directory): the next change tries again.
    assert [(x.kind, x.create) for x in one(st(ME, 3), st(ME, 3, isr=(1, 2)), hosted=False)] == [
        (Kind.BECOME_LEADER, True)
    ]


def test_no_leader_elected() -> None:
    assert [t.kind for t in one(st(ME, 3), st(-1, 4))] == [Kind.LEADERLESS]


def test_a_reassignment_moving_the_replica_off_removes_it() -> None:
    moved = st(2, 5, replicas=(2, 3, 4))
    assert one(st(ME, 4), moved) == [Transition(Kind.REMOVE, "t", 0, moved)]


def test_a_reassignment_adding_this_broker_creates_a_follower() -> None:
    adding = PartitionState(2, 4, frozenset({2, 3}), (2, 3, 1), 5, adding=(1,))
    before = st(2, 4, replicas=(2, 3), isr=(2, 3))
    assert one(before, adding, hosted=False) == [Transition(Kind.BECOME_FOLLOWER, "t", 0, adding, create=True)]


def test_a_change_to_a_partition_never_here_is_none_of_this_brokers_business() -> None:
    assert one(st(2, 0, replicas=(2, 3)), st(3, 1, replicas=(2, 3)), hosted=False) == []
    assert one(None, st(2, 0, replicas=(2, 3)), hosted=False) == []


def test_a_deleted_topic_drops_the_replica_here_only() -> None:
    assert one(st(ME, 2), None) == [Transition(Kind.DELETE, "t", 0, None)]
    assert one(st(2, 2, replicas=(2, 3)), None, hosted=False) == []


def test_each_changed_partition_once_in_the_order_given() -> None:
    after = {("t", p): st(ME if p % 2 else 2, 0) for p in range(3)}
    out = partition_transitions(ME, {}, after, [("t", 2), ("t", 0), ("t", 2), ("t", 1)], set())
    assert [(t.key, t.kind) for t in out] == [
        (("t", 2), Kind.BECOME_FOLLOWER),
        (("t", 0), Kind.BECOME_FOLLOWER),
        (("t", 1), Kind.BECOME_LEADER),
    ]


def test_a_topic_deleted_and_created_again_drops_the_old_replica_and_creates_a_new_one() -> None:
    before = {("t", 0): st(ME, 7), ("t", 1): st(ME, 7)}
    after = {("t", 0): st(2, 0)}
    out = partition_transitions(ME, before, after, [("t", 0), ("t", 1)], set(before), deleted_topics={"t"})
    assert [(t.key, t.kind, t.create) for t in out] == [
        (("t", 0), Kind.DELETE, False),
        (("t", 0), Kind.BECOME_FOLLOWER, True),
        (("t", 1), Kind.DELETE, False),
    ]
