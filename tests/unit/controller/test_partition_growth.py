"""CreatePartitions in the controller core: explicit replica lists honoured and checked as Kafka's
controller checks them (its error codes and words), the default placement otherwise."""

from __future__ import annotations

import pytest

from epochlog.codes import Err
from epochlog.controller.controller import Controller
from epochlog.controller.partition_growth import Refusal


def cluster(brokers: int = 4, rf: int = 2) -> Controller:
    c = Controller(session_timeout_ms=1000)
    for b in range(1, brokers + 1):
        c.register_broker(b, 0)
    c.create_topic("t", 2, rf)
    c.drain_changes()
    return c


def replicas(c: Controller) -> list[tuple[int, ...]]:
    t = c.topics["t"]
    return [t.partitions[p].replicas for p in sorted(t.partitions)]


def test_assignments_are_honoured_with_the_first_live_replica_leading() -> None:
    c = cluster()
    assert c.add_partitions("t", 4, [[4, 3], [3, 1]]) is None
    assert replicas(c)[2:] == [(4, 3), (3, 1)]
    st = c.topics["t"].partitions[2]
    assert (st.leader, st.isr) == (4, frozenset({3, 4}))
    assert {p for _t, p, _s in c.drain_changes()} == {2, 3}


def test_a_fenced_replica_is_kept_but_not_in_the_isr() -> None:
    c = cluster()
    c.heartbeat(1, 900)
    c.heartbeat(2, 900)
    c.heartbeat(3, 900)
    c.tick(1500)  # broker 4 missed its session
    assert c.add_partitions("t", 3, [[4, 2]]) is None
    st = c.topics["t"].partitions[2]
    assert (st.replicas, st.leader, st.isr) == ((4, 2), 2, frozenset({2}))


BAD = {
    "fewer-assignments-than-partitions": (
        [[1, 2]],
        Err.INVALID_REPLICA_ASSIGNMENT,
        "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.",
    ),
    "unknown-broker": (
        [[1, 9], [1, 2]],
        Err.INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes broker 9, but no such broker is registered.",
    ),
    "duplicate-broker": (
        [[1, 2], [3, 3]],
        Err.INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes the broker 3 more than once.",
    ),
    "wrong-replication-factor": (
        [[1, 2], [1, 2, 3]],
        Err.INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes a partition with 3 replica(s), but this is not consistent "
        "with previous partitions, which have 2 replica(s).",
    ),
    "empty-list": (
        [[1, 2], []],
        Err.INVALID_REPLICA_ASSIGNMENT,
        "The manual partition assignment includes an empty replica list.",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_assignments_are_refused_and_add_nothing(case: str) -> None:
    c = cluster()
    wanted, code, message = BAD[case]
    assert c.add_partitions("t", 4, wanted) == Refusal(code, message)
    assert len(c.topics["t"].partitions) == 2 and not c.drain_changes()


def test_all_replicas_fenced_is_refused() -> None:
    c = cluster()
    c.heartbeat(1, 900)
    c.heartbeat(2, 900)
    c.tick(1500)  # 3 and 4 fenced
    refusal = c.add_partitions("t", 3, [[3, 4]])
    assert refusal is not None and refusal.error_code == Err.INVALID_REPLICA_ASSIGNMENT
    assert "for partition 2 are fenced or in controlled shutdown" in refusal.message


def test_counts_that_are_not_an_increase() -> None:
    c = cluster()
    assert c.add_partitions("t", 2) == Refusal(Err.INVALID_PARTITIONS, "Topic already has 2 partition(s).")
    words = "The topic t currently has 2 partition(s); 1 would not be an increase."
    assert c.add_partitions("t", 1) == Refusal(Err.INVALID_PARTITIONS, words)


def test_validate_only_checks_but_adds_nothing() -> None:
    c = cluster()
    assert c.add_partitions("t", 3, [[1, 2]], validate_only=True) is None
    assert c.add_partitions("t", 3, [[1, 1]], validate_only=True) is not None
    assert len(c.topics["t"].partitions) == 2 and not c.drain_changes()


def test_default_placement_without_assignments() -> None:
    c = cluster()
    assert c.add_partitions("t", 4) is None
    assert all(len(r) == 2 and len(set(r)) == 2 for r in replicas(c))
    assert c.add_partitions("t", 5, None) is None and len(c.topics["t"].partitions) == 5
