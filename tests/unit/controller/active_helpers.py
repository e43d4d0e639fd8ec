"""An active QuorumController over a small cluster, for the tests of the active controller's rules."""

from __future__ import annotations

from epochlog.controller.controller import Controller
from epochlog.controller.leader_balance import BalancePolicy
from epochlog.controller.quorum_controller import QuorumController
from epochlog.controller.records import MetadataRecord

SESSION_MS = 9000
GRACE_MS = 3000


def cluster_log(partitions: int = 3) -> list[MetadataRecord]:
    """Brokers 1, 2, 3 at 127.0.0.1:9001..9003 and topic t with ``partitions`` partitions of three replicas."""
    c = Controller()
    for b in (1, 2, 3):
        c.register_broker(b, 0, host="127.0.0.1", port=9000 + b)
    c.create_topic("t", partitions, 3)
    return list(c.records)


def active(
    now_ms: int = 10_000,
    partitions: int = 3,
    balance: BalancePolicy | None = None,
    snapshot_bytes: int = 1 << 30,
) -> QuorumController:
    """A controller that followed another's log and just became the active one at ``now_ms``."""
    log = cluster_log(partitions)
    qc = QuorumController(SESSION_MS, GRACE_MS, balance, snapshot_bytes)
    qc.rebuild(log, len(log), now_ms)
    qc.became_leader(len(log))
    assert qc.maybe_activate(leader_ready=True, now_ms=now_ms)
    return qc
