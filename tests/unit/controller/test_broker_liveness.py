"""Fencing a broker whose process is gone: its session connection closed, or its listener refused the new
active controller's knock (controller/broker_liveness.py through QuorumController). And the other side:
a new active controller never fences a broker that reaches it."""

from __future__ import annotations

import pytest

from epochlog.controller.broker_liveness import ProbeTarget
from epochlog.controller.records import BrokerFenced
from tests.unit.controller.active_helpers import GRACE_MS, SESSION_MS, active

pytestmark = pytest.mark.unit

T0 = 10_000


def _leader_of_0(qc) -> int:  # type: ignore[no-untyped-def]
    return int(qc.core.topics["t"].partitions[0].leader)


def test_the_last_session_connection_closing_fences_the_broker_and_moves_its_leadership() -> None:
    qc = active(T0)
    leader = _leader_of_0(qc)
    qc.session_opened("conn-a", leader)
    assert qc.connection_lost("conn-a") == leader
    assert not qc.core.alive(leader)
    assert _leader_of_0(qc) != leader
    assert BrokerFenced(leader) in qc.take_proposals()


def test_a_broker_with_another_session_connection_stays() -> None:
    qc = active(T0)
    qc.session_opened("old", 1)
    qc.session_opened("new", 1)
    assert qc.connection_lost("old") is None
    assert qc.core.alive(1)
    assert qc.connection_lost("new") == 1


def test_closing_a_connection_no_broker_registered_on_fences_nobody() -> None:
    qc = active(T0)
    qc.session_opened("conn-a", 1)
    assert qc.connection_lost("someone-else") is None
    assert qc.connection_lost("conn-a") == 1
    assert qc.connection_lost("conn-a") is None  # once
    assert all(qc.core.alive(b) for b in (2, 3))


def test_a_standby_fences_nothing_and_forgets_the_sessions_of_its_activation() -> None:
    qc = active(T0)
    qc.session_opened("conn-a", 1)
    qc.session_opened("conn-c", 3)
    qc.proposed(100)
    qc.lost_leadership()
    assert qc.connection_lost("conn-c") is None  # a standby fences nobody
    qc.session_opened("conn-b", 2)
    qc.became_leader(qc.applied)
    assert qc.maybe_activate(True, T0 + 50)
    # Active again: broker 1 may have reached the controller that was active meanwhile; a connection of the
    # last activation closing says nothing about its process now. Nor does one opened while standing by.
    assert qc.connection_lost("conn-a") is None
    assert qc.connection_lost("conn-b") is None
    assert all(qc.core.alive(b) for b in (1, 2, 3))


def test_a_new_active_controller_fences_no_broker_that_reaches_it_within_the_grace() -> None:
    qc = active(T0)
    for now in range(T0, T0 + 3 * SESSION_MS, 1000):
        for b in (1, 2):  # 3 never speaks to this controller: its process died with the old one
            qc.core.heartbeat(b, now)
        qc.tick(now)
        assert qc.core.alive(1) and qc.core.alive(2)
        assert qc.core.alive(3) is (now <= T0 + GRACE_MS)  # fenced once the grace ran out


def test_the_knock_goes_to_unheard_brokers_with_a_listener_but_not_the_colocated_one() -> None:
    qc = active(T0)
    assert qc.probe_targets() == [ProbeTarget(b, "127.0.0.1", 9000 + b) for b in (1, 2, 3)]
    qc.core.heartbeat(2, T0 + 1)
    assert [t.broker for t in qc.probe_targets()] == [1, 3]
    assert [t.broker for t in qc.probe_targets(colocated_broker=1)] == [3]
    qc.core.register_broker(4, T0 - 1, host="127.0.0.1", port=0)  # no listener to knock on
    qc.core.brokers[4].last_heartbeat_ms = T0 - 1
    assert 4 not in [t.broker for t in qc.probe_targets()]


def test_a_refused_knock_fences_an_unheard_broker_but_not_one_heard_since() -> None:
    qc = active(T0)
    leader = _leader_of_0(qc)
    other = next(b for b in (1, 2, 3) if b != leader)
    qc.core.heartbeat(other, T0 + 5)  # it answered this controller after the knock went out
    assert not qc.probe_refused(other)
    assert qc.core.alive(other)
    assert qc.probe_refused(leader)
    assert not qc.core.alive(leader) and _leader_of_0(qc) != leader


def test_a_controller_deposed_while_knocking_fences_nobody() -> None:
    qc = active(T0)
    targets = qc.probe_targets()
    qc.proposed(100)
    qc.lost_leadership()
    assert not any(qc.probe_refused(t.broker) for t in targets)
    assert qc.probe_targets() == []
    assert all(qc.core.alive(b) for b in (1, 2, 3))
