"""Auto leader rebalance, decided in controller/leader_balance.py and asked by QuorumController.tick."""

from __future__ import annotations

import pytest

from epochlog.controller.leader_balance import BalancePolicy, needs_balance
from tests.unit.controller.active_helpers import active

pytestmark = pytest.mark.unit

INTERVAL = 300_000
T0 = 10_000


def _moved_away(qc, partitions: list[int]) -> None:  # type: ignore[no-untyped-def]
    """Leadership of ``partitions`` of t moves off their preferred replica (as after a broker restart)."""
    for p in partitions:
        st = qc.core.topics["t"].partitions[p]
        other = next(r for r in st.replicas if r != st.replicas[0])
        assert qc.core.elect_leader("t", p, other)


def _leaders(qc) -> dict[int, int]:  # type: ignore[no-untyped-def]
    return {p: st.leader for p, st in qc.core.topics["t"].partitions.items()}


def _preferred(qc) -> dict[int, int]:  # type: ignore[no-untyped-def]
    return {p: st.replicas[0] for p, st in qc.core.topics["t"].partitions.items()}


def _keep_alive(qc, now: int) -> None:  # type: ignore[no-untyped-def]
    for b in (1, 2, 3):
        qc.core.heartbeat(b, now)


def test_the_first_check_is_one_interval_after_activation_and_moves_leaders_back() -> None:
    qc = active(T0, balance=BalancePolicy(True, INTERVAL, 10))
    _moved_away(qc, [0])
    _keep_alive(qc, T0 + INTERVAL - 1)
    assert qc.tick(T0 + INTERVAL - 1) == []  # not yet: the new controller waits a whole interval
    assert _leaders(qc) != _preferred(qc)
    _keep_alive(qc, T0 + INTERVAL)
    assert qc.tick(T0 + INTERVAL) == [("t", 0)]
    assert _leaders(qc) == _preferred(qc)
    assert qc.take_proposals()  # the elections are records to propose


def test_checks_come_once_per_interval() -> None:
    qc = active(T0, balance=BalancePolicy(True, INTERVAL, 10))
    _keep_alive(qc, T0 + INTERVAL)
    assert qc.tick(T0 + INTERVAL) == []  # balanced: checked, nothing to do
    _moved_away(qc, [1])
    _keep_alive(qc, T0 + 2 * INTERVAL - 1)
    assert qc.tick(T0 + 2 * INTERVAL - 1) == []  # the next check is an interval after the last
    _keep_alive(qc, T0 + 2 * INTERVAL)
    assert qc.tick(T0 + 2 * INTERVAL) == [("t", 1)]


@pytest.mark.parametrize(("percentage", "moves"), [(40, False), (34, False), (33, True), (0, True)])
def test_a_broker_over_the_imbalance_percentage_triggers_the_rebalance(percentage: int, moves: bool) -> None:
    # Eight partitions over three brokers: broker 1 is preferred for 0, 3 and 6; losing one is a third of
    # its share, over 33 percent and under 34. Brokers 2 and 3 lose none.
    qc = active(T0, partitions=8, balance=BalancePolicy(True, INTERVAL, percentage))
    _moved_away(qc, [3])
    assert qc.core.imbalance()[1] == pytest.approx(1 / 3)
    _keep_alive(qc, T0 + INTERVAL)
    assert bool(qc.tick(T0 + INTERVAL)) is moves


def test_needs_balance_is_strictly_over_the_limit() -> None:
    assert not needs_balance({1: 0.10, 2: 0.0}, 10)
    assert needs_balance({1: 0.11, 2: 0.0}, 10)
    assert not needs_balance({}, 0)


def test_disabled_never_rebalances() -> None:
    qc = active(T0, balance=BalancePolicy(False, INTERVAL, 10))
    _moved_away(qc, [0])
    for k in (1, 2, 10):
        _keep_alive(qc, T0 + k * INTERVAL)
        assert qc.tick(T0 + k * INTERVAL) == []
    assert _leaders(qc) != _preferred(qc)


def test_a_standby_decides_nothing_and_a_new_activation_restarts_the_clock() -> None:
    qc = active(T0, balance=BalancePolicy(True, INTERVAL, 10))
    _moved_away(qc, [0])
    qc.proposed(100)
    qc.lost_leadership()
    assert qc.tick(T0 + INTERVAL) == []  # a standby neither fences nor rebalances
    assert qc.core.records[qc.persisted :] == []
    later = T0 + INTERVAL + 5
    qc.became_leader(qc.applied)
    assert qc.maybe_activate(True, later)
    _keep_alive(qc, later + INTERVAL - 1)
    assert qc.tick(later + INTERVAL - 1) == []
    _keep_alive(qc, later + INTERVAL)
    assert qc.tick(later + INTERVAL) == [("t", 0)]
