"""What the demo was asked to do and what it saw: options, timeline, leader changes, result."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

# Traced: every state transition of the brokers and controllers is judged by the trace checker at the end.
BROKER_SETTINGS = {
    "replica.lag.time.max.ms": "5000",
    "group.initial.rebalance.delay.ms": "0",
    "epochlog.trace.enable": "true",
}
# Kafka's automatic preferred-leader rebalance, checked every 5 s instead of 300 s: once the killed broker is
# back in the ISR it takes its partitions back (a second, clean leader change in a new epoch).
CONTROLLER_SETTINGS = {
    "auto.leader.rebalance.enable": "true",
    "leader.imbalance.check.interval.seconds": "5",
    "epochlog.trace.enable": "true",
}


@dataclass
class DemoOptions:
    data_dir: Path | None = None
    duration: float = 60.0
    rate: int = 1000  # events per second
    report: Path = Path("epochlog-demo-report.html")
    keep_data: bool = False
    topic: str = "page-views"
    partitions: int = 3
    trigger_seconds: float = 3.0
    kill_at: float = 1 / 3  # fraction of the producing time
    restart_at: float = 2 / 3
    catch_up_timeout: float = 120.0
    seed: int = 7


@dataclass
class TimelineEvent:
    t: float  # seconds since the producer started
    kind: str  # kill, restart, leader, isr, phase, problem
    text: str


@dataclass
class PartitionState:
    leader: int
    epoch: int
    isr: tuple[int, ...] = ()


@dataclass
class LeaderChange:
    t: float
    partition: int
    old_leader: int
    old_epoch: int
    new_leader: int
    new_epoch: int


@dataclass
class BatchInfo:
    batch_id: int
    t: float  # when the batch finished writing, seconds since the producer started
    rows: int
    seconds: float


@dataclass
class DemoResult:
    topic: str = ""
    partitions: int = 0
    brokers: int = 3
    controllers: int = 3  # a quorum
    data_dir: str = ""
    data_kept: bool = False
    report_path: str = ""
    rate: int = 0
    duration: float = 0.0
    wall_seconds: float = 0.0
    produced: int = 0
    acked: int = 0
    produce_errors: dict[str, int] = field(default_factory=dict)
    unflushed: int = 0
    acked_per_second: list[int] = field(default_factory=list)
    ack_latency_ms: dict[str, float] = field(default_factory=dict)
    max_latency_at: float = 0.0
    in_log: int = -1
    log_lost: int = -1
    log_duplicated: int = -1
    in_output: int = 0
    output_batches: int = 0
    aggregate_rows: int = 0
    aggregate_total: int = 0
    top_countries: list[tuple[str, int]] = field(default_factory=list)
    lost: int = -1
    duplicated: int = -1
    mismatched: int = 0
    unacked_in_output: int = 0
    lost_examples: list[str] = field(default_factory=list)
    duplicate_examples: list[str] = field(default_factory=list)
    kill_t: float | None = None
    killed_broker: int | None = None
    killed_epoch: int | None = None
    failover_seconds: float | None = None
    restart_t: float | None = None
    killed_controller: str | None = None  # the active controller's node name, killed with partition 0's leader
    controller_failover_seconds: float | None = None  # until another controller was active
    new_controller: str | None = None
    leader_changes: list[LeaderChange] = field(default_factory=list)
    leaders_before: dict[int, tuple[int, int]] = field(default_factory=dict)
    leaders_after: dict[int, tuple[int, int]] = field(default_factory=dict)
    timeline: list[TimelineEvent] = field(default_factory=list)
    batches: list[BatchInfo] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    caught_up: bool = False
    # The second query's copy through the exactly-once sink, read back with read_committed.
    eos_topic: str = ""
    eos_rows: int = -1
    eos_lost: int = -1
    eos_duplicated: int = -1
    eos_examples: list[str] = field(default_factory=list)
    eos_uncommitted_rows: int = -1  # what a read_uncommitted consumer sees (aborted attempts' rows too)
    txn_committed: int = -1  # the brokers' epochlog_transaction_coordinator_completed_total
    txn_aborted: int = -1
    # The trace checker over the processes' traces (src/epochlog/trace/): checks made, events, violations.
    trace_checks: int = 0
    trace_events: int = 0
    trace_violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.lost == 0
            and self.duplicated == 0
            and self.mismatched == 0
            and self.eos_lost == 0
            and self.eos_duplicated == 0
            and not self.problems
        )


class DemoError(Exception):
    """The demo could not run (as opposed to: it ran and found a problem)."""
