"""What a leader does past its broker's lease (replication/lease.py): it stops taking and answering writes
and consumer fetches, unless every ISR follower still fetches from it."""

from __future__ import annotations

from epochlog.codes import Err
from epochlog.replication.lease import BrokerLease
from epochlog.replication.partition import PartitionReplica
from epochlog.replication.types import FetchRequest, PartitionState
from epochlog.sim.disk_log import SimLog

SESSION = 9000


def leader_with_lease(answered_at: int = 0) -> PartitionReplica:
    r = PartitionReplica(1, "t", 0, SimLog(), min_insync_replicas=2, follower_silence_ms=1000)
    r.lease = BrokerLease(SESSION)
    r.lease.answered(answered_at, fenced=False)
    r.apply_state(PartitionState(1, 0, frozenset({1, 2}), (1, 2), 0), 0)
    return r


def test_within_the_lease_it_serves() -> None:
    r = leader_with_lease()
    assert r.check_produce(-1, SESSION - 1) == Err.NONE
    appended = r.append(["a"], SESSION - 1)
    assert r.ack_result(appended.wait_offset, SESSION - 1) is None  # waits for follower 2


def test_past_the_lease_with_a_silent_follower_it_refuses_and_answers_waiting_writes() -> None:
    r = leader_with_lease()
    appended = r.append(["a"], 100)
    assert r.ack_result(appended.wait_offset, SESSION) == Err.NOT_LEADER_OR_FOLLOWER
    assert r.check_produce(-1, SESSION) == Err.NOT_LEADER_OR_FOLLOWER
    assert r.append(["b"], SESSION).error == Err.NOT_LEADER_OR_FOLLOWER
    consumer = FetchRequest(-1, 0, -1, 0)
    assert r.handle_fetch(consumer, SESSION)[0].error == Err.NOT_LEADER_OR_FOLLOWER
    r.lease.answered(SESSION, fenced=False)  # the controller answers again: it serves as the metadata says
    assert r.check_produce(-1, SESSION + 1) == Err.NONE


def test_past_the_lease_it_serves_while_every_isr_follower_fetches() -> None:
    r = leader_with_lease()
    appended = r.append(["a"], 100)
    r.handle_fetch(FetchRequest(2, 0, -1, 0), SESSION - 500)  # follower 2 still fetching
    assert r.serves_as_leader(SESSION)
    r.handle_fetch(FetchRequest(2, 1, 0, 0), SESSION)
    assert r.ack_result(appended.wait_offset, SESSION) == Err.NONE  # committed, and answered
    assert not r.serves_as_leader(SESSION + 1001), "the follower went silent"


def test_the_only_isr_member_serves_past_its_lease() -> None:
    """No other ISR member, so no clean election can move the partition: stopping would only make it
    unavailable. Its writes commit on it alone, as in Kafka."""
    r = PartitionReplica(1, "t", 0, SimLog())
    r.lease = BrokerLease(SESSION)
    r.lease.answered(0, fenced=False)
    r.apply_state(PartitionState(1, 0, frozenset({1}), (1, 2), 0), 0)
    assert r.serves_as_leader(SESSION + 60_000)
