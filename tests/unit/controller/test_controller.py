"""The controller core's decisions: elections, epochs, fencing, AlterPartition guards."""

from __future__ import annotations

from epochlog.controller.controller import (
    FENCED_LEADER_EPOCH,
    INELIGIBLE_REPLICA,
    INVALID_UPDATE_VERSION,
    NO_LEADER,
    Controller,
)
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
    assert c.alter_partition(ok)[0] == INVALID_UPDATE_VERSION  # stale partition epoch
    s = st(c)
    stale_epoch = AlterIsr("t", 0, 1, s.leader_epoch - 1, frozenset({1}), s.partition_epoch)
    assert c.alter_partition(stale_epoch)[0] == FENCED_LEADER_EPOCH
    c.fence(3)
    s = st(c)
    add_fenced = AlterIsr("t", 0, 1, s.leader_epoch, frozenset({1, 2, 3}), s.partition_epoch)
    assert c.alter_partition(add_fenced)[0] == INELIGIBLE_REPLICA  # KIP-320


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
