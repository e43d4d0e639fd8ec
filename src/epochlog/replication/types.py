"""The small value types the replication core speaks in (not kio's request classes)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1

class Role(Enum):
    NONE = "none"
    LEADER = "leader"
    FOLLOWER = "follower"


class FetchOutcome(Enum):
    """What a follower did with its leader's answer to a fetch."""

    APPENDED = "appended"  # took the records (maybe none), the leader's HW and log start
    TRUNCATED = "truncated"  # cut its log at a divergence (or, without epochs, to the leader's HW)
    RESTARTED = "restarted"  # was behind the leader's log start: its log now starts there
    STALE = "stale"  # answers an older term or position, or the role changed: ignored
    FENCED = "fenced"  # the leader's epoch and ours differ: wait for newer metadata
    ERROR = "error"  # another error: back off and ask again


class TruncationMode(Enum):
    LEADER_EPOCH = "leader-epoch"
    HIGH_WATERMARK = "high-watermark"  # pre-KIP-101, for the simulator and tests only


@dataclass(frozen=True)
class FetchRequest:
    replica_id: int
    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int
    # A follower's own log start offset (Fetch's LogStartOffset): how far its DeleteRecords have gone.
    log_start_offset: int = -1
    read_committed: bool = False  # a consumer's isolation_level=1: read up to the last stable offset
    # A consumer's Fetch v11+ (client metadata, KIP-392): a follower may serve it, up to its own HW.
    from_any_replica: bool = False


@dataclass(frozen=True)
class DivergingEpoch:
    epoch: int
    end_offset: int


@dataclass
class FetchDecision:
    """The leader's answer to a fetch: an error, a divergence, or where to read from."""

    error: int
    high_watermark: int = -1
    log_start_offset: int = -1
    diverging: DivergingEpoch | None = None
    read_from: int = -1  # the server reads batches from this offset...
    read_to: int | None = None  # ...up to here (a consumer: the HW or LSO), or to the log end (None: a follower)
    last_stable_offset: int = -1


@dataclass
class FetchResponse:
    error: int
    high_watermark: int
    diverging: DivergingEpoch | None = None
    batches: Any = None  # opaque to the core; appended with append_as_follower
    leader_epoch: int = UNDEFINED_EPOCH
    log_start_offset: int = -1  # the leader's, for OFFSET_OUT_OF_RANGE
    # The request it answers (its CurrentLeaderEpoch and fetch offset): an answer to a fetch of an older
    # term or from a position that is over must change nothing. None: not known, taken as current.
    asked_epoch: int | None = None
    asked_offset: int | None = None


@dataclass(frozen=True, slots=True)
class LeaderAppend:
    """The core's answer to a leader append: everything the server needs to answer the producer.

    ``error`` is NONE or the refusal (not the leader, a KIP-359 epoch mismatch, too small an ISR for
    acks=all); nothing was written then. ``wait_offset``: an acks=all answer waits until the HW passes it
    (-1: answer now). ``duplicate``: the producer's sequence showed the batch already in the log, and the
    offsets are the earlier append's (an idempotent retry)."""

    error: int
    first_offset: int = -1
    last_offset: int = -1
    duplicate: bool = False
    record_count: int = 0
    log_append_time_ms: int = -1
    wait_offset: int = -1


@dataclass(frozen=True)
class AlterIsr:
    """A leader's proposal to the controller, guarded by the partition epoch."""

    topic: str
    partition: int
    leader_id: int
    leader_epoch: int
    new_isr: frozenset[int]
    partition_epoch: int


@dataclass
class PartitionState:
    """What the controller decided for one partition."""

    leader: int
    leader_epoch: int
    isr: frozenset[int]
    replicas: tuple[int, ...]
    partition_epoch: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    # A reassignment in progress (KIP-455): ``replicas`` is then the target set followed by the replicas
    # leaving; ``adding`` are in the target but not the original set, ``removing`` the other way round.
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    # KIP-966 (controller/elr.py): eligible leader replicas and the last known ones.
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()
