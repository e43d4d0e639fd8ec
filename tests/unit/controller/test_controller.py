"""The controller core's decisions: elections, epochs, fencing, AlterPartition guards."""

from __future__ import annotations

from epochlog.codes import Err
from epochlog.controller.controller import NO_LEADER, Controller
from epochlog.controller.records import UncleanElection
from epochlog.replication.types import AlterIsr


def cluster(n: int = 3, unclean: bool = False) -> Controller:
    c = Controller(session_timeout_ms=1000)
    for b in range(1, n + 1):
        c.register_broker(b, 0)
    c.create_topic("t", 1, n, unclean_leader_election=unclean)
    c.drain_changes()
    return c


def st(c: Controller):
    return c.topics["t"].partitions[0]


def test_create_assigns_first_replica_as_leader_at_epoch_0() -> None:
    c = cluster()
    assert (st(c).leader, st(c).leader_epoch, st(c).isr) == (1, 0, frozenset({1, 2, 3}))


def test_session_expiry_fences_and_elects_from_isr_with_new_epoch() -> None:
    c = cluster()
    c.heartbeat(2, 900)
    c.heartbeat(3, 900)
    c.tick(1500)
    assert c.brokers[1].fenced
    assert st(c).leader == 2 and st(c).leader_epoch == 1 and 1 not in st(c).isr


def test_returning_leader_gets_a_new_epoch() -> None:
    c = cluster()
    c.register_broker(1, 10)  # re-registration without an election (KIP-101)
    assert st(c).leader == 1 and st(c).leader_epoch == 1


def test_unclean_restart_leaves_shared_isr() -> None:
    c = cluster()
    c.register_broker(1, 10, clean_shutdown=False)
    assert st(c).leader == 2 and 1 not in st(c).isr


def test_no_unclean_election_unless_enabled() -> None:
    for unclean, leader in ((False, NO_LEADER), (True, 3)):
        c = cluster(unclean=unclean)
        c.fence(2)
        c.fence(3)  # ISR is now {1}
        c.register_broker(3, 5)
        c.fence(1)
        assert st(c).leader == leader
        if unclean:
            assert st(c).isr == frozenset({3})
            assert any(isinstance(r, UncleanElection) for r in c.records)


def test_alter_partition_guards() -> None:
    c = cluster()
    s = st(c)
    ok = AlterIsr("t", 0, 1, s.leader_epoch, frozenset({1, 2}), s.partition_epoch)
    assert c.alter_partition(ok)[0] == 0
    assert c.alter_partition(ok)[0] == Err.INVALID_UPDATE_VERSION  # stale partition epoch
    s = st(c)
    stale_epoch = AlterIsr("t", 0, 1, s.leader_epoch - 1, frozenset({1}), s.partition_epoch)
    assert c.alter_partition(stale_epoch)[0] == Err.FENCED_LEADER_EPOCH
    c.fence(3)
    s = st(c)
    add_fenced = AlterIsr("t", 0, 1, s.leader_epoch, frozenset({1, 2, 3}), s.partition_epoch)
    assert c.alter_partition(add_fenced)[0] == Err.INELIGIBLE_REPLICA  # KIP-320


def test_controlled_shutdown_moves_leadership_first() -> None:
    c = cluster()
    c.controlled_shutdown(1)
    assert st(c).leader == 2 and 1 not in st(c).isr


def test_preferred_leader_election() -> None:
    c = cluster()
    c.elect_leader("t", 0, 2)
    assert st(c).leader == 2
    assert c.imbalance()[1] == 1.0
    assert c.elect_preferred() == [("t", 0)]
    assert st(c).leader == 1 and st(c).leader_epoch == 2


def _new_active(session_ms: int = 9000) -> Controller:
    """A controller that replayed the log of another (so it has no heartbeat history) and just took over."""
    old = Controller(session_timeout_ms=session_ms)
    for b in (1, 2, 3):
        old.register_broker(b, 0)
    old.create_topic("t", 1, 3)
    c = Controller.replay(old.records, session_ms, 10_000)
    c.activate(10_000, grace_ms=3000)
    return c


def test_a_new_active_controller_vouches_for_no_broker_until_it_hears_from_it() -> None:
    c = _new_active()
    assert sorted(b.broker_id for b in c.unheard()) == [1, 2, 3]
    c.heartbeat(2, 10_100)
    assert sorted(b.broker_id for b in c.unheard()) == [1, 3]
    c.tick(12_999)
    assert all(c.alive(b) for b in (1, 2, 3))  # the grace still runs
    c.tick(13_001)
    assert not c.alive(1) and not c.alive(3) and c.alive(2)


def test_a_refused_connection_fences_an_unheard_leader_at_once_and_moves_its_partition() -> None:
    c = _new_active()
    leader = st(c).leader
    epoch = st(c).leader_epoch
    assert c.broker_unreachable(leader)
    assert not c.alive(leader)
    assert st(c).leader not in (leader, NO_LEADER) and st(c).leader_epoch == epoch + 1
    assert leader not in st(c).isr


def test_a_refused_connection_does_not_fence_a_broker_that_heartbeat_since_activation() -> None:
    c = _new_active()
    c.heartbeat(1, 10_050)
    assert not c.broker_unreachable(1)
    assert c.alive(1)
    assert not c.broker_unreachable(99)  # unknown
