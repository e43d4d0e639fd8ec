"""The controller's answer to a broker's failed log directory (KIP-858): its replicas there leave the ISR,
leadership moves to an in-sync replica elsewhere, and they stay out until the broker registers again."""

from __future__ import annotations

from epochlog.controller.controller import NO_LEADER, Controller


def cluster(n: int = 3, rf: int = 3) -> Controller:
    c = Controller(session_timeout_ms=1000)
    for b in range(1, n + 1):
        c.register_broker(b, 0)
    c.create_topic("t", 2, rf)
    c.drain_changes()
    return c


def test_leader_on_failed_dir_is_replaced_by_an_in_sync_replica() -> None:
    c = cluster()
    before = c.topics["t"].partitions[0]
    assert before.leader == 1
    assert c.replicas_offline(1, [("t", 0)]) == [("t", 0)]
    after = c.topics["t"].partitions[0]
    assert after.leader in (2, 3) and after.leader_epoch == before.leader_epoch + 1
    assert 1 not in after.isr
    # Only the named replica: broker 1 still follows t-1, whose directory did not fail.
    assert 1 in c.topics["t"].partitions[1].isr
    assert c.replicas_offline(1, [("t", 0)]) == []  # once


def test_follower_on_failed_dir_leaves_the_isr() -> None:
    c = cluster()
    lead = c.topics["t"].partitions[1].leader
    follower = next(r for r in c.topics["t"].partitions[1].replicas if r != lead)
    c.replicas_offline(follower, [("t", 1)])
    st = c.topics["t"].partitions[1]
    assert st.leader == lead and follower not in st.isr


def test_sole_replica_on_failed_dir_leaves_the_partition_leaderless() -> None:
    c = cluster(rf=1)
    c.replicas_offline(1, [("t", 0)])
    assert c.topics["t"].partitions[0].leader == NO_LEADER
    # Not re-elected from the dead disk by a later election either.
    c.elect_leader("t", 0)
    assert c.topics["t"].partitions[0].leader == NO_LEADER


def test_offline_replicas_survive_replay_and_clear_on_registration() -> None:
    c = cluster()
    c.replicas_offline(1, [("t", 0)])
    again = Controller.replay(c.records, now_ms=0)
    assert again.offline_replicas == {1: {("t", 0)}}
    c.register_broker(1, 10)
    assert c.offline_replicas.get(1) is None
    assert Controller.replay(c.records, now_ms=0).offline_replicas.get(1) is None


def test_sole_replica_leads_again_after_restart_with_its_dir_repaired() -> None:
    c = cluster(rf=1)
    c.replicas_offline(1, [("t", 0)])
    c.controlled_shutdown(1)  # the broker stops (every directory gone) ...
    assert c.topics["t"].partitions[0].isr == frozenset({1})  # ... and stays the last in-sync replica
    c.register_broker(1, 10)  # restarted with the directory repaired
    assert c.topics["t"].partitions[0].leader == 1
