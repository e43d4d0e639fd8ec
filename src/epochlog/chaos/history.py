"""What the clients did and saw, with times in seconds since the run's start: the checkers' only input."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Send:
    """One produce: its unique value, when it was sent, and its outcome once the producer reported it."""

    producer: str
    value: str
    partition: int
    t_sent: float
    t_done: float | None = None
    ok: bool | None = None  # None: no outcome reported (the producer was torn down first)
    offset: int = -1
    error: str = ""


@dataclass(frozen=True)
class Read:
    """One record a consumer was handed."""

    consumer: str
    partition: int
    offset: int
    value: str
    t: float


@dataclass
class Txn:
    """One transaction of the `txn` workload: its values (partition, value) and what became of it."""

    producer: str
    n: int
    values: list[tuple[int, str]]
    intent: str  # commit or abort
    t_begin: float
    t_end: float | None = None
    outcome: str = "unknown"  # committed, aborted, unknown (the answer was lost, or the producer went fatal)
    error: str = ""


@dataclass
class Fault:
    kind: str  # kill, pause, partition
    target: str  # the node's name
    at_s: float
    why: str = ""  # what aimed it there: "any", "active controller", "leader of 3 partitions", ...
    healed_s: float | None = None
    first_ack_after_s: float | None = None  # filled in by the availability checker
    # A broker cut off while leading partitions (the watcher's view at the fault): partition -> seconds
    # from the cut to the first acknowledgement of a write to it sent after the cut (None: none came).
    led_resume_s: dict[int, float | None] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "target": self.target,
            "at_s": round(self.at_s, 3),
            "healed_s": None if self.healed_s is None else round(self.healed_s, 3),
            "why": self.why,
            "first_ack_after_s": None if self.first_ack_after_s is None else round(self.first_ack_after_s, 3),
            "led_resume_s": {str(p): None if s is None else round(s, 3) for p, s in sorted(self.led_resume_s.items())},
        }


@dataclass(frozen=True)
class Observation:
    """Something the watcher saw change: a partition's leader and epoch, or the active controller."""

    t: float
    what: str  # "leader" or "controller"
    partition: int
    node: int
    epoch: int


@dataclass
class History:
    t0: float = field(default_factory=time.monotonic)
    sends: list[Send] = field(default_factory=list)
    reads: dict[str, list[Read]] = field(default_factory=dict)  # consumer -> what it polled, in order
    final: list[Read] = field(default_factory=list)  # the final read from the beginning
    final_complete: bool = False
    faults: list[Fault] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    txns: list[Txn] = field(default_factory=list)
    commits: list[tuple[float, str, int, int]] = field(default_factory=list)  # (acknowledged at, member, p, offset)
    workload_end_s: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def add_send(self, send: Send) -> None:
        with self._lock:
            self.sends.append(send)

    def add_read(self, read: Read) -> None:
        with self._lock:
            self.reads.setdefault(read.consumer, []).append(read)

    def add_txn(self, txn: Txn) -> None:
        with self._lock:
            self.txns.append(txn)

    def add_commit(self, t: float, member: str, partition: int, offset: int) -> None:
        with self._lock:
            self.commits.append((t, member, partition, offset))

    def add_fault(self, fault: Fault) -> None:
        with self._lock:
            self.faults.append(fault)

    def observe(self, obs: Observation) -> None:
        with self._lock:
            self.observations.append(obs)

    def note(self, text: str) -> None:
        with self._lock:
            self.notes.append(f"{self.now():7.2f}s {text}")
