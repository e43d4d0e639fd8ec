"""KIP-392: the leader's choice of a consumer's read replica (Kafka's RackAwareReplicaSelector over the
ISR members that hold the offset, on live brokers) and a follower serving consumers only up to its HW."""

from __future__ import annotations

import pytest

from epochlog.codes import Err
from epochlog.config_error import ConfigError
from epochlog.replication import read_replica
from epochlog.replication.partition import PartitionReplica
from epochlog.replication.read_replica import NO_PREFERRED, ReplicaView, eligible, follower_read, select
from epochlog.replication.types import FetchRequest, FetchResponse, PartitionState
from epochlog.server.config import BrokerConfig
from epochlog.sim.disk_log import SimLog

pytestmark = pytest.mark.unit

RACKS = {1: "rack-1", 2: "rack-2", 3: "rack-3", 5: "rack-2"}
LEADER = ReplicaView(1, 100, 0)


def test_a_consumer_without_a_rack_or_on_the_leaders_rack_reads_from_the_leader() -> None:
    followers = [ReplicaView(2, 100, 0), ReplicaView(3, 100, 0)]
    assert select("", LEADER, followers, RACKS) == NO_PREFERRED
    assert select("rack-1", LEADER, followers, RACKS) == NO_PREFERRED
    assert select("rack-9", LEADER, followers, RACKS) == NO_PREFERRED  # no replica on its rack


def test_a_consumer_is_sent_to_the_most_caught_up_replica_of_its_rack() -> None:
    assert select("rack-3", LEADER, [ReplicaView(2, 100, 0), ReplicaView(3, 90, 0)], RACKS) == 3
    two_near = [ReplicaView(2, 90, 0), ReplicaView(5, 100, 0)]
    assert select("rack-2", LEADER, two_near, RACKS) == 5
    tie = [ReplicaView(2, 100, 0), ReplicaView(5, 100, 50)]
    assert select("rack-2", LEADER, tie, RACKS) == 2  # equal ends: the more recently caught up


def test_a_replica_on_a_broker_no_longer_live_is_never_chosen() -> None:
    gone = {1: "rack-1", 2: "rack-2"}  # broker 3 is fenced: not in the live brokers' racks
    assert select("rack-3", LEADER, [ReplicaView(3, 100, 0)], gone) == NO_PREFERRED


def test_only_isr_members_holding_the_offset_are_candidates() -> None:
    followers = {2: (0, 100, 1000), 3: (0, 50, 1000), 4: (60, 200, 1000), 5: (0, 100, 1000)}
    chosen = eligible(followers, frozenset({1, 2, 3, 4}), 55, 1500)
    assert [v.broker for v in chosen] == [2]  # 3 ends below 55, 4 starts above, 5 is out of the ISR
    assert chosen[0].since_caught_up_ms == 500


def test_a_follower_serves_up_to_its_high_watermark_and_never_above() -> None:
    d = follower_read(5, Err.NONE, 5, 0, 8, 5, False)
    assert (d.error, d.read_from, d.read_to) == (Err.NONE, 5, 5)  # between HW and log end: nothing, no error
    d = follower_read(2, Err.NONE, 5, 0, 8, 3, True)
    assert (d.read_from, d.read_to) == (2, 3)  # read_committed: the last stable offset
    assert follower_read(9, Err.NONE, 5, 0, 8, 5, False).error == Err.OFFSET_OUT_OF_RANGE
    assert follower_read(0, Err.NONE, 5, 1, 8, 5, False).error == Err.OFFSET_OUT_OF_RANGE
    assert follower_read(0, Err.FENCED_LEADER_EPOCH, 5, 0, 8, 5, False).error == Err.FENCED_LEADER_EPOCH


def test_the_follower_core_reads_for_consumers_only_with_client_metadata_and_below_its_hw() -> None:
    leader_log = SimLog()
    leader = PartitionReplica(1, "t", 0, leader_log, replica_lag_time_max_ms=100)
    leader.apply_state(PartitionState(1, 0, frozenset({1, 2}), (1, 2), 0), 0)
    follower = PartitionReplica(2, "t", 0, SimLog())
    follower.apply_state(PartitionState(1, 0, frozenset({1, 2}), (1, 2), 0), 0)
    for x in "abc":
        leader.append([x], 0)

    def replicate() -> None:
        req = follower.next_fetch()
        assert req is not None
        decision, _ = leader.handle_fetch(req, 0)
        batches = leader_log.read(decision.read_from, 100)
        follower.handle_fetch_response(FetchResponse(decision.error, decision.high_watermark, None, batches, 0))

    replicate()
    assert (follower.log.log_end_offset, follower.high_watermark) == (3, 0)
    consumer = FetchRequest(-1, 0, -1, 0, from_any_replica=True)
    d, _ = follower.handle_fetch(consumer, 0)
    assert d.error == Err.NONE and d.read_to == 0  # holds 3 records, serves none: its HW is 0
    replicate()
    d, _ = follower.handle_fetch(consumer, 0)
    assert d.read_to == 3 == follower.high_watermark
    old_client = FetchRequest(-1, 0, -1, 0)
    assert follower.handle_fetch(old_client, 0)[0].error == Err.NOT_LEADER_OR_FOLLOWER
    # The leader's candidates: itself, and the follower that holds the offset
    me, near = leader.read_replicas(2, 0)
    assert me.broker == 1 and [v.broker for v in near] == [2]


def test_replica_selector_class_accepts_kafkas_selector_and_refuses_others() -> None:
    assert BrokerConfig.from_properties({}).replica_selector_class == ""
    cfg = BrokerConfig.from_properties({"replica.selector.class": read_replica.RACK_AWARE_SELECTOR})
    assert cfg.replica_selector_class == read_replica.RACK_AWARE_SELECTOR
    with pytest.raises(ConfigError, match=r"replica\.selector\.class"):
        BrokerConfig.from_properties({"replica.selector.class": "com.example.Mine"})
