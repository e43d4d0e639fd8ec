"""Auto leader rebalance (auto.leader.rebalance.enable): when to look, and when to move leaders back.

Every ``leader.imbalance.check.interval.seconds`` of being the active controller, if some broker does not
lead more than ``leader.imbalance.per.broker.percentage`` of the partitions it is the preferred (first)
replica of, leadership goes back to every preferred replica that is alive and in sync. Sans-IO: the active
controller's timer asks ``maybe_balance`` with the time; the records it decides are proposed like any other.

Why the clock starts at activation: a controller that just took over has seen none of the cluster settle
under it (brokers are still finding it), so it waits a whole interval before judging balance, as the
controller server did with its check timer reset while standing by.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from epochlog.controller.controller import Controller

NEVER = 1 << 62


@dataclass(frozen=True)
class BalancePolicy:
    enabled: bool = True  # auto.leader.rebalance.enable
    interval_ms: int = 300_000  # leader.imbalance.check.interval.seconds, in ms
    max_imbalance_percentage: int = 10  # leader.imbalance.per.broker.percentage


def needs_balance(imbalance: Mapping[int, float], max_imbalance_percentage: int) -> bool:
    """Some broker's share of preferred partitions it does not lead is over the limit (strictly: at exactly
    the limit the cluster is as balanced as it was asked to be)."""
    limit = max_imbalance_percentage / 100
    return any(share > limit for share in imbalance.values())


class LeaderBalancer:
    def __init__(self, policy: BalancePolicy | None = None) -> None:
        self.policy = policy or BalancePolicy()
        self.next_check_ms = NEVER

    def activated(self, now_ms: int) -> None:
        self.next_check_ms = now_ms + self.policy.interval_ms

    def deactivated(self) -> None:
        self.next_check_ms = NEVER

    def maybe_balance(self, core: Controller, now_ms: int) -> list[tuple[str, int]]:
        """The partitions whose leadership went back to the preferred replica (recorded in ``core``)."""
        if not self.policy.enabled or now_ms < self.next_check_ms:
            return []
        self.next_check_ms = now_ms + self.policy.interval_ms
        if not needs_balance(core.imbalance(), self.policy.max_imbalance_percentage):
            return []
        return core.elect_preferred()
