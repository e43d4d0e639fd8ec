"""KIP-966 in the controller core: the ELR rules, elections from the ELR, unclean-shutdown removal judged
by the previous broker epoch, and the records and image that carry them."""

from __future__ import annotations

import pytest

from epochlog.controller import elr
from epochlog.controller.controller import NO_LEADER, UNSAFE_KEEP_UNCLEAN_IN_ELR, Controller
from epochlog.controller.image import ELR_FEATURE, ClusterImage
from epochlog.controller.records import FeatureLevel, PartitionChange, UncleanElection, from_json, to_json
from epochlog.replication.types import AlterIsr, PartitionState

pytestmark = pytest.mark.unit


def cluster(min_isr: int = 2, brokers: int = 3, elr_version: int = 1) -> Controller:
    c = Controller(session_timeout_ms=1000, min_isr=min_isr, elr_version=elr_version)
    assert c.init_features()
    for b in range(1, brokers + 1):
        c.register_broker(b, 0)
    c.create_topic("t", 1, brokers)
    return c


def state(c: Controller) -> PartitionState:
    return c.topics["t"].partitions[0]


def shrink(c: Controller, isr: set[int]) -> None:
    st = state(c)
    err, _ = c.alter_partition(AlterIsr("t", 0, st.leader, st.leader_epoch, frozenset(isr), st.partition_epoch))
    assert err == 0


def test_target_elr_rules() -> None:
    st = PartitionState(1, 0, frozenset({1, 2}), (1, 2, 3), 0)
    assert elr.target_elr(st, {1, 2}, 2) == ((), ())  # at min ISR: nothing eligible beyond the ISR
    assert elr.target_elr(st, {1}, 2) == ((2,), ())  # below: the one leaving joins the ELR
    below = PartitionState(1, 0, frozenset({1}), (1, 2, 3), 0, elr=(2,))
    assert elr.target_elr(below, set(), 2) == ((1, 2), ())
    assert elr.target_elr(below, set(), 2, unclean_shutdown={2}) == ((1,), ())  # unclean: not eligible
    assert elr.target_elr(below, {1, 2}, 2) == ((), ())  # back at min ISR: both lists clear
    assert elr.target_elr(None, set(), 2) == ((), ())


def test_last_known_leader_rules() -> None:
    led = PartitionState(1, 0, frozenset({1}), (1, 2, 3), 0, elr=(2,))
    assert elr.last_known_leader(led, set(), elr.NO_LEADER) == (1,)  # the ISR empties: remember its leader
    leaderless = PartitionState(-1, 1, frozenset(), (1, 2, 3), 1, elr=(1, 2), last_known_elr=(1,))
    assert elr.last_known_leader(leaderless, set(), elr.NO_LEADER) == (1,)  # kept while nobody leads
    assert elr.last_known_leader(leaderless, {2}, 2) == ()  # cleared once somebody does
    assert elr.last_known_leader(None, set(), elr.NO_LEADER) == ()
    offline = PartitionState(-1, 1, frozenset({1}), (1,), 1)  # its only replica's log dir failed
    assert elr.last_known_leader(offline, set(), elr.NO_LEADER) == (1,)


def test_new_cluster_finalizes_the_feature_once_and_an_old_one_keeps_its_log() -> None:
    c = Controller()
    assert c.init_features() and c.image.elr_enabled
    assert not c.init_features()
    old = Controller()
    old.register_broker(1, 0)
    assert not old.init_features() and not old.image.elr_enabled  # an existing cluster is not changed
    off = Controller(elr_version=0)
    assert off.init_features() and not off.image.elr_enabled
    assert off.image.features == {ELR_FEATURE: 0}


def test_isr_below_min_isr_fills_the_elr_and_catching_up_clears_it() -> None:
    c = cluster()
    c.fence(3)
    assert sorted(state(c).isr) == [1, 2] and state(c).elr == ()
    c.fence(2)
    assert sorted(state(c).isr) == [1] and state(c).elr == (2,)
    c.register_broker(2, 10, previous_epoch=c.brokers[2].epoch)  # clean restart: stays eligible
    assert state(c).elr == (2,)
    shrink(c, {1, 2})  # caught up: back in the ISR, at min ISR
    assert state(c).elr == () and state(c).last_known_elr == ()


def test_empty_isr_elects_a_live_elr_member_which_becomes_the_isr() -> None:
    c = cluster()
    c.fence(3)
    c.fence(2)
    c.fence(1)
    st = state(c)
    assert st.leader == NO_LEADER and st.isr == frozenset() and st.elr == (1, 2)
    c.register_broker(2, 10, previous_epoch=c.brokers[2].epoch)
    st = state(c)
    assert st.leader == 2 and st.isr == frozenset({2}) and st.elr == (1,)
    assert not any(isinstance(r, UncleanElection) for r in c.records)


def test_last_replica_standing_after_a_power_loss_is_not_elected() -> None:
    c = cluster()
    c.fence(3)
    c.fence(2)  # ISR {1}, ELR {2}: 2 holds every committed record
    c.fence(1)  # power loss of the last ISR member
    c.register_broker(1, 10, previous_epoch=-1)  # no clean-shutdown marker
    st = state(c)
    assert not c.brokers[1].clean_shutdown
    assert st.leader == NO_LEADER and st.elr == (2,) and st.last_known_elr == (1,)
    c.register_broker(2, 20, previous_epoch=c.brokers[2].epoch)
    st = state(c)
    assert st.leader == 2 and st.isr == frozenset({2})


def test_a_stale_previous_epoch_is_an_unclean_shutdown() -> None:
    c = cluster()
    c.fence(3)
    c.fence(2)
    epoch = c.brokers[2].epoch
    c.register_broker(2, 10, previous_epoch=epoch - 1)  # a marker from an older life of the broker
    assert not c.brokers[2].clean_shutdown
    assert 2 not in state(c).elr and state(c).last_known_elr == ()  # the partition still has its leader


def test_unclean_restart_of_the_sole_replica_uses_the_last_known_leader() -> None:
    # One replica, nothing better anywhere: Kafka elects the last known one (uncleanly) rather than stay
    # offline forever.
    c = cluster(min_isr=1, brokers=1)
    c.fence(1)
    assert state(c).isr == frozenset() and state(c).elr == (1,)
    c.register_broker(1, 10, previous_epoch=-1)
    st = state(c)
    assert st.leader == 1 and st.isr == frozenset({1}) and st.elr == () and st.last_known_elr == ()
    assert any(isinstance(r, UncleanElection) for r in c.records)


def test_every_replica_crashed_comes_back_through_the_last_known_leader() -> None:
    # Kafka's balanced recovery: every replica was killed (no clean-shutdown marker anywhere), so none is
    # eligible; the leader the partition had when its ISR emptied is elected, uncleanly, once it is back.
    c = cluster()
    c.fence(3)
    c.fence(2)
    c.fence(1)
    assert state(c).last_known_elr == (1,) and state(c).elr == (1, 2)
    c.register_broker(3, 10, previous_epoch=-1)
    c.register_broker(2, 20, previous_epoch=-1)
    st = state(c)
    assert st.leader == NO_LEADER and st.elr == (1,) and st.last_known_elr == (1,)  # 1 may yet come back clean
    c.register_broker(1, 30, previous_epoch=-1)
    st = state(c)
    assert st.leader == 1 and st.isr == frozenset({1}) and st.last_known_elr == ()
    assert any(isinstance(r, UncleanElection) for r in c.records)


def test_keep_unclean_switch_breaks_the_rule() -> None:
    c = cluster()
    c.unsafe.add(UNSAFE_KEEP_UNCLEAN_IN_ELR)
    c.fence(3)
    c.fence(2)
    c.fence(1)
    c.register_broker(1, 10, previous_epoch=-1)
    assert state(c).leader == 1  # elected from the ELR though it lost unflushed records


def test_unclean_election_clears_the_elr() -> None:
    c = cluster()
    c.fence(3)
    c.fence(2)
    c.fence(1)
    c.register_broker(3, 10, previous_epoch=c.brokers[3].epoch)  # out of the ISR before it fell below min
    assert state(c).leader == NO_LEADER
    assert c.elect_leader("t", 0, unclean=True)
    st = state(c)
    assert st.leader == 3 and st.elr == () and st.last_known_elr == ()


def test_without_the_feature_nothing_changes() -> None:
    c = cluster(elr_version=0)
    c.fence(3)
    c.fence(2)
    c.fence(1)
    st = state(c)
    assert st.isr == frozenset({1}) and st.elr == ()  # the last ISR member stays, as before KIP-966


def test_topic_min_isr_override_decides() -> None:
    c = Controller(min_isr=1)
    c.init_features()
    for b in (1, 2, 3):
        c.register_broker(b, 0)
    c.create_topic("t", 1, 3, configs={"min.insync.replicas": "3"})
    c.fence(3)
    assert state(c).elr == (3,)


def test_records_and_snapshot_carry_elr() -> None:
    r = PartitionChange("t", 0, -1, 3, (), (1, 2, 3), 4, elr=(1, 2), last_known_elr=(3,))
    kind, data = to_json(r)
    assert data["elr"] == [1, 2] and from_json(kind, data) == r
    _, plain = to_json(PartitionChange("t", 0, 1, 0, (1,), (1,), 0))
    assert "elr" not in plain and "last_known_elr" not in plain  # stored as records before KIP-966 were
    c = cluster()
    c.fence(3)
    c.fence(2)
    image = ClusterImage()
    for rec in c.snapshot_records():
        image.apply(rec)
    assert image.topics["t"].partitions[0].elr == (2,) and image.elr_enabled
    assert FeatureLevel(ELR_FEATURE, 1) in c.snapshot_records()


def test_a_replica_reassigned_away_leaves_the_elr() -> None:
    c = cluster()
    c.fence(3)
    assert sorted(state(c).isr) == [1, 2] and state(c).elr == ()
    err, _ = c.alter_reassignment("t", 0, [1])  # a pure removal completes at once, the ISR below min ISR
    assert err == 0
    st = state(c)
    assert st.replicas == (1,) and st.isr == frozenset({1})
    assert st.elr == () and st.last_known_elr == ()  # 2 and 3 hold no replica to lead from any more
