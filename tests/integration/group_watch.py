"""Watching confluent-kafka group members from the outside: who owned which partition when (from the rebalance
callbacks), every record each member read and when, and every commit the coordinator acknowledged; then the
checks a consumer group owes its members (one owner per partition at a time, reads only of owned partitions,
duplicates only from ranges a previous owner read and could not commit)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, TopicPartition

Partition = tuple[str, int]


@dataclass
class Handover:
    """A partition a member gave up (or lost) with records read past its last acknowledged commit."""

    member: str
    tp: Partition
    committed: int  # the member's last acknowledged commit (the next offset to read), -1 if none
    last_read: int
    at: float


@dataclass
class Watched:
    """One consumer, its callbacks recording ownership; ``commit_on_revoke`` commits what it read of a
    partition before giving it up, as an application that wants no duplicates does."""

    name: str
    consumer: Consumer
    owned: set[Partition] = field(default_factory=set)
    events: list[tuple[float, str, Partition]] = field(default_factory=list)  # (time, assign|revoke|lost, tp)
    reads: list[tuple[float, Partition, int, bytes]] = field(default_factory=list)
    last_read: dict[Partition, int] = field(default_factory=dict)
    committed: dict[Partition, int] = field(default_factory=dict)  # acknowledged commits, next offset to read
    commit_log: list[tuple[float, Partition, int]] = field(default_factory=list)
    handovers: list[Handover] = field(default_factory=list)
    commit_errors: list[str] = field(default_factory=list)
    commit_on_revoke: bool = True
    closed: bool = False

    def subscribe(self, topics: list[str]) -> None:
        self.consumer.subscribe(topics, on_assign=self._assign, on_revoke=self._revoke, on_lost=self._lost)

    def _assign(self, c: Consumer, parts: list[TopicPartition]) -> None:
        now = time.monotonic()
        for tp in parts:
            self.owned.add((tp.topic, tp.partition))
            self.events.append((now, "assign", (tp.topic, tp.partition)))

    def _give_up(self, parts: list[TopicPartition], how: str) -> None:
        gone = [(tp.topic, tp.partition) for tp in parts]
        if how == "revoke" and self.commit_on_revoke:
            self.commit([tp for tp in gone if tp in self.last_read])
        now = time.monotonic()
        for tp in gone:
            self.owned.discard(tp)
            self.events.append((now, how, tp))
            # Forgotten once given up: were the partition ever handed back, a commit before the first new read
            # would otherwise commit this old position over what the owners since committed.
            read = self.last_read.pop(tp, -1)
            if read >= self.committed.get(tp, -1):
                self.handovers.append(Handover(self.name, tp, self.committed.get(tp, -1), read, now))

    def _revoke(self, c: Consumer, parts: list[TopicPartition]) -> None:
        self._give_up(parts, "revoke")

    def _lost(self, c: Consumer, parts: list[TopicPartition]) -> None:
        self._give_up(parts, "lost")

    def commit(self, tps: Iterable[Partition] | None = None) -> bool:
        """Commit the next offset after what was read (of ``tps``, else of everything owned and read)."""
        chosen = [tp for tp in (self.owned if tps is None else tps) if tp in self.last_read]
        offsets = [TopicPartition(t, p, self.last_read[(t, p)] + 1) for t, p in chosen]
        if not offsets:
            return True
        try:
            done = self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as e:  # the coordinator is moving, or the member was fenced
            self.commit_errors.append(str(e))
            return False
        now = time.monotonic()
        for tp in done or []:
            if tp.error is None and tp.offset >= 0:
                key = (tp.topic, tp.partition)
                self.committed[key] = max(self.committed.get(key, -1), tp.offset)
                self.commit_log.append((now, key, tp.offset))
        return True

    def poll(self, timeout: float = 0.02) -> int:
        if self.closed:
            return 0
        n = 0
        # One record at a time: a callback runs inside poll(), so each record's time and owner check see the
        # ownership it was read under (a batch from consume() may straddle a revocation).
        for i in range(500):
            m = self.consumer.poll(timeout if i == 0 else 0)
            if m is None:
                break
            if m.error() is not None:
                continue
            now = time.monotonic()
            tp, off = (m.topic(), m.partition()), m.offset()
            assert tp in self.owned, f"{self.name} read {tp}@{off} it does not own ({sorted(self.owned)})"
            assert off is not None
            self.reads.append((now, tp, off, m.value() or b""))
            self.last_read[tp] = max(self.last_read.get(tp, -1), off)
            n += 1
        return n

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.consumer.close()


def new_watched(name: str, conf: dict[str, Any], topics: list[str], **kw: Any) -> Watched:
    w = Watched(name, Consumer({"client.id": name, "enable.auto.commit": False, **conf}), **kw)
    w.subscribe(topics)
    return w


def poll_all(members: list[Watched], done: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll every open member until ``done()``, checking after each round that no partition has two owners."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        for w in members:
            w.poll()
        assert_one_owner(members)


def assert_one_owner(members: list[Watched]) -> None:
    seen: dict[Partition, str] = {}
    for w in members:
        if w.closed:
            continue
        for tp in w.owned:
            assert tp not in seen, f"{tp} owned by both {seen[tp]} and {w.name}"
            seen[tp] = w.name


def owned_by(members: list[Watched]) -> dict[Partition, str]:
    return {tp: w.name for w in members if not w.closed for tp in w.owned}


def duplicates(members: list[Watched]) -> dict[tuple[Partition, int], list[str]]:
    """Records read more than once, with who read them each time."""
    by: dict[tuple[Partition, int], list[str]] = {}
    for w in members:
        for _t, tp, off, _v in w.reads:
            by.setdefault((tp, off), []).append(w.name)
    return {k: v for k, v in by.items() if len(v) > 1}


def assert_duplicates_only_uncommitted(members: list[Watched]) -> int:
    """Every record read twice lies in a range a member read and gave up without an acknowledged commit (at
    least once); returns how many duplicates there were, which is at most the size of those ranges."""
    dups = duplicates(members)
    handovers = [h for w in members for h in w.handovers]
    uncommitted = sum(h.last_read - max(h.committed, 0) + 1 for h in handovers if h.last_read >= 0)
    for (tp, off), readers in dups.items():
        covered = any(h.tp == tp and max(h.committed, 0) <= off <= h.last_read for h in handovers)
        assert covered, f"{tp}@{off} read by {readers}, not in any uncommitted range given up: {handovers}"
    assert len(dups) <= uncommitted
    return len(dups)


def ownership_intervals(members: list[Watched]) -> dict[Partition, list[tuple[float, float, str]]]:
    """Per partition, each member's ownership intervals (assign to revoke or loss; still open: to infinity)
    from the rebalance callbacks."""
    intervals: dict[Partition, list[tuple[float, float, str]]] = {}
    for w in members:
        start: dict[Partition, float] = {}
        for t, how, tp in w.events:
            if how == "assign":
                start[tp] = t
            elif tp in start:
                intervals.setdefault(tp, []).append((start.pop(tp), t, w.name))
        for tp, t in start.items():
            intervals.setdefault(tp, []).append((t, float("inf"), w.name))
    return intervals


def assert_reads_follow_ownership(members: list[Watched]) -> None:
    """After a partition changes hands, its records come only from the new owner: each member's reads of a
    partition fall inside its own ownership intervals (from the callbacks), and the intervals of different
    members never overlap."""
    intervals = ownership_intervals(members)
    for w in members:
        for t, tp, off, _v in w.reads:
            mine = [iv for iv in intervals.get(tp, []) if iv[2] == w.name]
            assert any(a <= t <= b for a, b, _n in mine), f"{w.name} read {tp}@{off} at {t} outside its ownership"
    for tp, ivs in intervals.items():
        ivs.sort()
        for (_a1, b1, n1), (a2, _b2, n2) in itertools.pairwise(ivs):
            assert b1 <= a2, f"{tp}: {n1} owned it until {b1}, {n2} from {a2}"
