"""The broker's lease (replication/lease.py) in the simulator: a leader cut off from its followers and the
controller stops serving within the session timeout, writes resume at the new leader within the bound, and
each of the three invariants that say so can fail."""

from __future__ import annotations

import pytest

from epochlog.replication.lease import BrokerLease
from epochlog.replication.types import TruncationMode
from epochlog.sim.scenarios import _periodic, isolated_leader
from epochlog.sim.world import CONTROLLER, Faults, SimBroker, World

pytestmark = pytest.mark.sim

EPOCH = TruncationMode.LEADER_EPOCH
SLOW = Faults(min_delay_ms=30, max_delay_ms=40)  # answers slower than the controller's 25 ms tick


def names(w: World) -> set[str]:
    return {v.invariant for v in w.violations}


def test_lease_core() -> None:
    lease = BrokerLease(9000)
    assert not lease.holds(0), "a broker that only registered is fenced until a heartbeat says otherwise"
    assert not lease.lapsed(0), "never held: nothing lapsed"
    lease.answered(1000, fenced=False)
    assert lease.holds(9999) and not lease.holds(10_000)
    assert not lease.lapsed(9999) and lease.lapsed(10_000)
    lease.answered(500, fenced=False)  # a late answer to an older heartbeat never shortens it
    assert lease.holds(9999)
    lease.answered(2000, fenced=True)
    assert not lease.holds(2001) and not lease.lapsed(2001), "ended by the controller, not lapsed"
    lease.answered(3000, fenced=False)
    assert lease.holds(11_999)
    assert BrokerLease(9000, enabled=False).holds(10**12)


@pytest.mark.parametrize("faults", [None, SLOW], ids=["fast-network", "slow-network"])
def test_isolated_leader_stops_serving_and_writes_resume(faults: Faults | None) -> None:
    w = isolated_leader(EPOCH, faults=faults)
    assert not w.violations, "\n".join(w.history[-40:])
    assert any("lease expired" in line for line in w.history), "the cut-off leader had writes waiting on it"
    assert w.checker.cut_off_at is not None and w.checker.last_ack_at > w.checker.cut_off_at


def test_break_a_leader_without_a_lease_keeps_writes_waiting() -> None:
    w = isolated_leader(EPOCH, enforce_lease=False)
    assert "expired-lease-serves" in names(w), "\n".join(w.history[-40:])


class ReceiptLeaseWorld(World):
    """The lease counted from when the answer ARRIVED: it outlives the controller's session by the delay."""

    def heartbeat_answered(self, b: SimBroker, sent_ms: int, fenced: bool) -> None:
        super().heartbeat_answered(b, self.now, fenced)


class SilentController(World):
    """A controller that never fences a silent broker: the cut-off leader keeps its partition."""

    def controller_tick(self) -> None:
        self._push_states()


def _cut_leader(w: World) -> None:
    leader = w.state().leader
    for other in (CONTROLLER, *w.brokers):
        if other != leader:
            w.partition_network(leader, other)
    w.checker.cut_off_at = w.now


def test_break_a_lease_counted_from_the_answer_outlives_the_session() -> None:
    w = _periodic(ReceiptLeaseWorld(brokers=3, min_isr=2, faults=SLOW), 4500, {800: _cut_leader})
    assert "lease-outlives-session" in names(w), "\n".join(w.history[-40:])


def test_break_writes_do_not_resume_when_nobody_fences_the_leader() -> None:
    w = _periodic(SilentController(brokers=3, min_isr=2), 4500, {800: _cut_leader})
    assert "writes-resume" in names(w), "\n".join(w.history[-40:])


def test_quorum_down_leaders_keep_serving_while_their_followers_fetch() -> None:
    """No controller answers anyone (the quorum is down, so none fences anyone either): every lease runs out,
    yet each leader's ISR still fetches from it, so its writes commit and it keeps taking them, as Kafka's do."""

    def cut_controller(w: World) -> None:
        for b in w.brokers:
            w.partition_network(b, CONTROLLER)

    w = _periodic(SilentController(brokers=3, min_isr=2), 4500, {800: cut_controller})
    assert not w.violations, "\n".join(w.history[-40:])
    late = [t for t in w.checker.ack_time.values() if t > 800 + 1500 + 500]
    assert len(late) > 50, "writes went on being acknowledged after every lease ran out"
    assert not any("lease expired" in line for line in w.history)
