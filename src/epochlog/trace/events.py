"""The state transitions the cores report, as small typed records, and the JSON lines they are stored as.

The replication and quorum cores emit these through a ``Tracer`` handed to them (a no-op unless the
driver wants a trace); the server writes them to a file per node (trace/sink.py), the simulator hands
them straight to the checker (trace/check.py), which judges both the same way. This module is a leaf:
it imports nothing from epochlog, so every core may use it.

A stored line is one JSON object: ``node`` and ``src`` (``broker`` or ``controller``: in a combined
process both run under one node id), ``seq`` (per writer, from 0 at each start), ``ms`` (wall clock),
``ev`` (the record's kind) and the record's fields.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

BROKER = "broker"
CONTROLLER = "controller"


@dataclass(frozen=True)
class Event:
    kind: ClassVar[str] = ""


# -- any node ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Start(Event):
    """A writer (re)started: whatever a node holds only in memory starts over from here."""

    kind: ClassVar[str] = "start"
    pid: int = 0


@dataclass(frozen=True)
class DiskLost(Event):
    """The node lost its disk while down (the simulator's wipe): what it persisted is gone too."""

    kind: ClassVar[str] = "disk-lost"


@dataclass(frozen=True)
class Crash(Event):
    """A hard crash that lost ``lost`` unflushed records (the simulator's; a killed process loses none)."""

    kind: ClassVar[str] = "crash"
    lost: int = 0


# -- a partition replica (replication/partition.py) ------------------------------------------------


@dataclass(frozen=True)
class Role(Event):
    """The replica took the controller's decision: ``role`` in ``epoch`` under ``leader``. For a new
    leader, ``epoch_start`` is where its epoch begins in the epoch cache (its log end)."""

    kind: ClassVar[str] = "role"
    topic: str
    partition: int
    role: str
    epoch: int
    leader: int
    epoch_start: int
    leo: int
    hw: int
    tid: str = ""


@dataclass(frozen=True)
class Hw(Event):
    """The replica's high watermark moved. A leader's names the epochs of the records it newly commits,
    as ``(epoch, start offset)`` pairs covering [previous HW, hw): a committed record is (offset, epoch)."""

    kind: ClassVar[str] = "hw"
    topic: str
    partition: int
    role: str
    epoch: int
    hw: int
    leo: int
    epochs: tuple[tuple[int, int], ...] = ()
    tid: str = ""


@dataclass(frozen=True)
class Leo(Event):
    kind: ClassVar[str] = "leo"
    topic: str
    partition: int
    role: str
    epoch: int
    leo: int
    tid: str = ""


@dataclass(frozen=True)
class Isr(Event):
    """A leader proposed (``proposed``) or applied an ISR."""

    kind: ClassVar[str] = "isr"
    topic: str
    partition: int
    epoch: int
    partition_epoch: int
    leader: int
    isr: tuple[int, ...]
    proposed: bool
    tid: str = ""


@dataclass(frozen=True)
class Truncate(Event):
    """The log end went back from ``from_leo`` to ``to``; ``epoch_at`` is the epoch of the first record
    dropped (-1: unknown), so the checker can tell a committed record from a diverged one at that offset."""

    kind: ClassVar[str] = "truncate"
    topic: str
    partition: int
    role: str
    epoch: int
    from_leo: int
    to: int
    epoch_at: int
    hw: int
    reason: str
    tid: str = ""


@dataclass(frozen=True)
class LogRestart(Event):
    """The log was dropped whole and starts at the leader's log start (retention passed our end)."""

    kind: ClassVar[str] = "log-restart"
    topic: str
    partition: int
    epoch: int
    from_leo: int
    start: int
    tid: str = ""


@dataclass(frozen=True)
class TxnMarker(Event):
    kind: ClassVar[str] = "txn-marker"
    topic: str
    partition: int
    epoch: int
    producer_id: int
    commit: bool
    offset: int
    tid: str = ""


@dataclass(frozen=True)
class Unclean(Event):
    """The metadata says the controller elected ``leader`` uncleanly: committed records may be lost."""

    kind: ClassVar[str] = "unclean"
    topic: str
    partition: int
    leader: int


# -- a quorum member (raft/node.py) -----------------------------------------------------------------


@dataclass(frozen=True)
class RaftState(Event):
    """The quorum state the node persists (or started from): epoch, leader, vote."""

    kind: ClassVar[str] = "raft-state"
    epoch: int
    leader: int
    voted: int
    role: str


@dataclass(frozen=True)
class RaftVote(Event):
    kind: ClassVar[str] = "raft-vote"
    epoch: int
    candidate: int


@dataclass(frozen=True)
class RaftHw(Event):
    """The node's high watermark (commit) moved; a leader's names the epochs it newly commits, as Hw."""

    kind: ClassVar[str] = "raft-hw"
    epoch: int
    role: str
    hw: int
    epochs: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class RaftTruncate(Event):
    kind: ClassVar[str] = "raft-truncate"
    epoch: int
    from_leo: int
    to: int
    epoch_at: int


KINDS: dict[str, type[Event]] = {
    c.kind: c
    for c in (
        Start,
        DiskLost,
        Crash,
        Role,
        Hw,
        Leo,
        Isr,
        Truncate,
        LogRestart,
        TxnMarker,
        Unclean,
        RaftState,
        RaftVote,
        RaftHw,
        RaftTruncate,
    )
}


@dataclass(frozen=True)
class Stamped:
    """An event as one node wrote it: who, in which order, when."""

    node: int
    src: str
    seq: int
    ms: int
    event: Event


# -- where events go ----------------------------------------------------------------------------------


class Tracer(Protocol):
    """What a core emits through. ``enabled`` lets a core skip the work of describing an event nobody
    reads (finding the epochs a HW covers walks the epoch cache)."""

    @property
    def enabled(self) -> bool: ...

    def emit(self, event: Event) -> None: ...


class NoTracer:
    enabled = False

    def emit(self, event: Event) -> None:
        pass


NO_TRACE: Tracer = NoTracer()


class TopicTracer:
    """Fills in the topic id (which the core does not know) on the partition events it passes on: a topic
    deleted and created again under its name is another partition to the checker."""

    def __init__(self, inner: Tracer, topic_id: str) -> None:
        self.inner = inner
        self.topic_id = topic_id

    @property
    def enabled(self) -> bool:
        return self.inner.enabled

    def emit(self, event: Event) -> None:
        if hasattr(event, "tid"):
            event = dataclasses.replace(event, tid=self.topic_id)  # type: ignore[call-arg]
        self.inner.emit(event)


# -- the epoch cache, as much as the cores' log interfaces show of it ---------------------------------------

MAX_EPOCH_WALK = 64  # an offset further back than this many epochs is reported as of unknown epoch


class EpochLog(Protocol):
    def latest_epoch(self) -> int: ...

    def end_offset_for(self, epoch: int) -> tuple[int, int]: ...


def epochs_between(log: EpochLog, lo: int, hi: int) -> tuple[tuple[int, int], ...]:
    """The (epoch, start) of each epoch holding a record in [lo, hi), oldest first, the first start raised
    to ``lo``. Walks down from the latest epoch with ``end_offset_for(e - 1)``, which ends where ``e``
    starts; empty when the range is empty or the cache does not reach it."""
    if hi <= lo:
        return ()
    out: list[tuple[int, int]] = []
    e = log.latest_epoch()
    upper = 1 << 62  # where the epoch above ``e`` starts
    for _ in range(MAX_EPOCH_WALK):
        if e < 0:
            break
        prev, start = log.end_offset_for(e - 1)
        if start >= upper:
            break  # ``e`` is below the cache's earliest epoch: what lies there is not known
        if start < hi:
            out.append((e, max(start, lo)))
            if start <= lo:
                break
        e, upper = prev, start
    return tuple(reversed(out))


def epoch_at(log: EpochLog, offset: int) -> int:
    """The epoch of the record at ``offset`` (-1: unknown)."""
    found = epochs_between(log, offset, offset + 1)
    return found[0][0] if found else -1


# -- JSON lines -------------------------------------------------------------------------------------------


def encode(st: Stamped) -> str:
    row: dict[str, Any] = {"node": st.node, "src": st.src, "seq": st.seq, "ms": st.ms, "ev": st.event.kind}
    for f in dataclasses.fields(st.event):
        row[f.name] = getattr(st.event, f.name)
    return json.dumps(row, separators=(",", ":"))


def decode(line: str) -> Stamped | None:
    """One stored line back as a Stamped event; None for a line cut short by a kill or of an unknown kind."""
    try:
        row = json.loads(line)
        cls = KINDS.get(row.pop("ev", ""))
        if cls is None:
            return None
        head = (int(row.pop("node")), str(row.pop("src")), int(row.pop("seq")), int(row.pop("ms")))
        names = {f.name for f in dataclasses.fields(cls)}
        args = {k: (_tuples(v) if isinstance(v, list) else v) for k, v in row.items() if k in names}
        return Stamped(*head, cls(**args))
    except (ValueError, KeyError, TypeError):
        return None


def _tuples(v: list[Any]) -> tuple[Any, ...]:
    return tuple(_tuples(x) if isinstance(x, list) else x for x in v)
