"""The KIP-932 share-partition core under a simulated crowd: members that fetch, acknowledge with random
ACCEPT/RELEASE/REJECT, crash without a word (their locks time out), leave (their records are released) and
come back under a new member id; a partition leader that fails over, its successor rebuilding the partition
from the share coordinator's state, its predecessor sometimes still answering a fetch (a zombie, fenced by
leader epoch); and a share coordinator that fails over too, its successor replaying ``__share_group_state``
as written so far. All on a virtual clock.

The checkers, after every step, hold the core to what members were actually told:

- a record is never held by two members at once (a member holds it from its delivery until its lock
  expires, it acknowledges it, it leaves, or the leader fails over);
- an ACCEPTed record is never delivered again;
- every delivery's count is one more than the record's deliveries so far, never above
  ``group.share.delivery.count.limit``: a released or timed-out record comes back until the limit;
- an acknowledgement succeeds only from the member holding every record it names, and is refused only
  when some record is not held (expired, taken over) by that member;
- the coordinator's state equals what the leader would write (``durable_view``);
- the group reads read_committed and some runs of the log are aborted transactions: no record of an aborted
  transaction is ever delivered (the driver splits what it read with isolation.py, the core archives them);
- once faults stop, every record ends ACKNOWLEDGED or ARCHIVED: the start offset reaches the log's end, and
  each record was accepted once, rejected, or delivered as often as allowed (an aborted one: never).

Four deliberate bugs must be caught: a core that forgets to check who holds a record, one that delivers
accepted records again after a failover, one that does not persist acquisitions (Kafka 4.0's choice),
whose delivery counts restart after a failover, and one that delivers aborted transactions' records.
"""

from __future__ import annotations

import random
from collections import defaultdict
from dataclasses import dataclass, field, replace

import pytest

from epochlog.codes import Err
from epochlog.groups.share.isolation import AbortedTxn, LogBatch, offered
from epochlog.groups.share.messages import AckBatch, Acquired, PartitionEffect, StateWrite
from epochlog.groups.share.model import (
    ACCEPT,
    ACKNOWLEDGED,
    ACQUIRED,
    AVAILABLE,
    READ_COMMITTED,
    REJECT,
    RELEASE,
    SharePartitionConfig,
)
from epochlog.groups.share.partition import SharePartition
from epochlog.groups.share.records import PartitionState, Record, ShareStateStore
from tests.sweep import seeds

pytestmark = pytest.mark.sim

LOCK = 2_000
LIMIT = 3
KEY = ("g", "t", 0)
CFG = SharePartitionConfig(record_lock_duration_ms=LOCK, delivery_count_limit=LIMIT, max_record_locks=30)


@dataclass
class Member:
    name: str
    incarnation: int = 0
    alive: bool = True
    held: set[int] = field(default_factory=set)  # what it was given and has not acknowledged

    @property
    def member_id(self) -> str:
        return f"{self.name}.{self.incarnation}"


@dataclass
class Sim:
    rng: random.Random
    partition_cls: type[SharePartition]
    log_offsets: list[int]  # the offsets the log has (gaps: compacted away)
    log_end: int
    aborted: dict[int, AbortedTxn] = field(default_factory=dict)  # offset -> the aborted transaction holding it
    now: int = 0
    members: list[Member] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)  # __share_group_state as written
    store: ShareStateStore = field(default_factory=lambda: ShareStateStore(updates_per_snapshot=7))
    leader_epoch: int = 0
    leader: SharePartition | None = None
    zombie: SharePartition | None = None
    # The checker's own account, from what members were told.
    locks: dict[int, tuple[str, int]] = field(default_factory=dict)  # offset -> (member id, expiry)
    deliveries: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    accepted: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    rejected: set[int] = field(default_factory=set)
    violations: list[str] = field(default_factory=list)
    failovers: int = 0
    coordinator_failovers: int = 0
    fenced: int = 0
    refused_acks: int = 0
    faults: bool = True
    check_durable: bool = True  # off only to show a bug's own symptom, not this checker's catching it first

    def __post_init__(self) -> None:
        earliest = replace(CFG, auto_offset_reset="earliest")  # the whole log is to be read
        sp, eff = self.partition_cls.create(earliest, 0, self.log_end, None, self.leader_epoch)
        sp.config = CFG
        self.leader = sp
        self.persist(sp, eff)

    # -- the driver ---------------------------------------------------------------------------
    def persist(self, sp: SharePartition, effects: list[PartitionEffect]) -> bool:
        """Write the effects' state through the share coordinator; False if it refused (a fenced leader)."""
        for e in effects:
            if isinstance(e, StateWrite):
                err, recs = self.store.write(KEY, e.leader_epoch, e.state_epoch, e.start_offset, e.batches)
                if err != Err.NONE:
                    self.fenced += 1
                    return False
                self.records += recs
        if sp is self.leader and self.check_durable:
            st = self.store.states[KEY]
            if (st.start_offset, st.batches) != sp.durable_view():
                self.violations.append(f"coordinator state {st} differs from the leader's {sp.durable_view()}")
        return True

    def lock_holder(self, off: int) -> str | None:
        held = self.locks.get(off)
        return held[0] if held is not None and held[1] > self.now else None

    def fetch(self, m: Member, sp: SharePartition) -> None:
        start = sp.next_fetch_offset()
        upto = start + self.rng.randint(1, 12)
        batches, run = [], []
        for off in self.log_offsets:
            if start <= off < upto:
                txn = self.aborted.get(off)
                if run and (
                    off != run[-1] + 1 or len(run) >= self.rng.randint(1, 4) or txn != self.aborted.get(run[-1])
                ):
                    batches.append(self.batch(run[0], run[-1]))
                    run = []
                run.append(off)
        if run:
            batches.append(self.batch(run[0], run[-1]))
        data, dead = offered(READ_COMMITTED, batches, set(self.aborted.values()))
        got, eff = sp.acquire(
            self.now, m.member_id, data, self.rng.randint(1, 8), min(upto, self.log_end), aborted=dead
        )
        if not self.persist(sp, eff):
            return  # the write failed: the fetch is answered with an error, nothing is delivered
        for a in got:
            for off in range(a.first_offset, a.last_offset + 1):
                self.delivered(m, off, a)

    def batch(self, first: int, last: int) -> LogBatch:
        txn = self.aborted.get(first)
        return LogBatch(first, last) if txn is None else LogBatch(first, last, txn.producer_id, True)

    def delivered(self, m: Member, off: int, a: Acquired) -> None:
        if off not in self.log_offsets:
            self.violations.append(f"offset {off} is not in the log but was delivered")
        if off in self.aborted:
            self.violations.append(f"offset {off} of an aborted transaction delivered under read_committed")
        holder = self.lock_holder(off)
        if holder is not None:
            self.violations.append(f"offset {off} delivered to {m.member_id} while {holder} holds it: both hold it")
        if self.accepted[off]:
            self.violations.append(f"offset {off} was accepted but delivered again to {m.member_id}")
        self.deliveries[off] += 1
        if a.delivery_count != self.deliveries[off] or a.delivery_count > LIMIT:
            self.violations.append(
                f"offset {off} delivered with count {a.delivery_count}, delivery {self.deliveries[off]} of {LIMIT}"
            )
        self.locks[off] = (m.member_id, self.now + LOCK)
        m.held.add(off)

    def ack(self, m: Member, sp: SharePartition) -> None:
        held = sorted(m.held)
        if not held:
            return
        lo = self.rng.randrange(len(held))
        chosen = held[lo : lo + self.rng.randint(1, 6)]
        kinds = [ACCEPT, REJECT] if not self.faults else [ACCEPT, ACCEPT, RELEASE, REJECT]
        batches = []
        for off in chosen:
            kind = self.rng.choice(kinds)
            if batches and batches[-1][1] == off - 1 and batches[-1][2] == kind:
                batches[-1] = (batches[-1][0], off, kind)
            else:
                batches.append((off, off, kind))
        acks = [AckBatch(f, last, (k,)) for f, last, k in batches]
        # Offsets below the start offset are already final (archived at a failover): Kafka ignores them.
        gone = {off for off in chosen if off < sp.start_offset}
        valid = all(self.lock_holder(off) == m.member_id for off in chosen if off not in gone)
        err, eff = sp.acknowledge(self.now, m.member_id, acks)
        if err == Err.NONE and not self.persist(sp, eff):
            err = Err.UNKNOWN_SERVER_ERROR
        m.held -= set(chosen)
        if err != Err.NONE:
            self.refused_acks += 1
            if valid and sp is self.leader and err != Err.UNKNOWN_SERVER_ERROR:
                self.violations.append(f"{m.member_id} holds {chosen} but its acknowledgement got {err}")
            return
        if not valid:
            self.violations.append(f"{m.member_id} acknowledged {chosen}, which it no longer owns")
        for f, last, kind in batches:
            for off in range(f, last + 1):
                if off in gone:
                    continue
                self.locks.pop(off, None)
                if kind == ACCEPT:
                    self.accepted[off] += 1
                elif kind == REJECT:
                    self.rejected.add(off)

    def leave(self, m: Member) -> None:
        assert self.leader is not None
        if self.persist(self.leader, self.leader.member_left(self.now, m.member_id)):
            for off in [o for o, (mid, _) in self.locks.items() if mid == m.member_id]:
                del self.locks[off]
        m.held.clear()
        m.incarnation += 1

    def failover(self) -> None:
        """The partition's leadership moves; sometimes the share coordinator's too."""
        self.failovers += 1
        if self.rng.random() < 0.4:
            self.coordinator_failovers += 1
            self.store = ShareStateStore.from_records(self.records)
            self.store.updates_per_snapshot = 7
        self.zombie = self.leader if self.rng.random() < 0.5 else None
        self.leader_epoch += 1
        err, state = self.store.read(KEY, self.leader_epoch)
        assert err == Err.NONE
        sp, eff = self.partition_cls.from_state(CFG, state or PartitionState(start_offset=0), self.leader_epoch)
        self.leader = sp
        self.locks.clear()  # no lock outlives its leader
        self.persist(sp, eff)

    def step(self) -> None:
        rng = self.rng
        self.now += rng.choice([0, 10, 50, 200, 700])
        assert self.leader is not None
        self.persist(self.leader, self.leader.tick(self.now))
        m = rng.choice(self.members)
        r = rng.random()
        if not m.alive:
            if r < 0.3:
                m.alive, m.incarnation = True, m.incarnation + 1
                m.held.clear()
            return
        if self.faults and r < 0.03:
            self.failover()
        elif self.faults and r < 0.06:
            m.alive = False  # a crash: its locks time out
        elif self.faults and r < 0.08:
            self.leave(m)
        elif self.faults and self.zombie is not None and r < 0.12:
            self.fetch(m, self.zombie)
        elif r < 0.55:
            self.fetch(m, self.leader)
        else:
            self.ack(m, self.leader)

    def settle(self) -> None:
        """Faults stop: everyone is back and acknowledges with ACCEPT or REJECT until nothing is in flight."""
        self.faults = False
        self.zombie = None
        for m in self.members:
            if not m.alive:
                m.alive, m.incarnation = True, m.incarnation + 1
                m.held.clear()
        assert self.leader is not None
        for _ in range(3000):
            if self.leader.start_offset >= self.log_end or self.violations:
                break
            self.step()
        sp = self.leader
        if sp.start_offset < self.log_end or sp.inflight:
            self.violations.append(f"not settled: SPSO {sp.start_offset} of {self.log_end}, {len(sp.inflight)} left")
            return
        for off in self.log_offsets:
            if self.accepted[off] > 1:
                self.violations.append(f"offset {off} accepted {self.accepted[off]} times")
            if off in self.aborted:
                continue  # archived undelivered (any delivery was a violation already)
            if not self.accepted[off] and off not in self.rejected and self.deliveries[off] < LIMIT:
                self.violations.append(f"offset {off} ended after {self.deliveries[off]} deliveries without an ack")


def aborted_txns(seed: int, offsets: list[int]) -> dict[int, AbortedTxn]:
    """A few runs of the log as aborted transactions, each its own producer's, its marker past its last record
    (a random of its own, so the crowd's draws stay as they were without them)."""
    rng = random.Random(seed * 7919 + 1)
    out: dict[int, AbortedTxn] = {}
    for i in range(rng.randint(0, 3)):
        at = rng.randrange(len(offsets))
        run = [o for o in offsets[at : at + rng.randint(1, 5)] if o not in out]
        if run:
            txn = AbortedTxn(100 + i, run[0], run[-1] + 1)
            out.update(dict.fromkeys(run, txn))
    return out


def run(
    seed: int, partition_cls: type[SharePartition] = SharePartition, steps: int = 600, check_durable: bool = True
) -> Sim:
    rng = random.Random(seed)
    n = rng.randint(20, 60)
    offsets = sorted(rng.sample(range(n + n // 5), n))  # a few gaps, as compaction leaves
    sim = Sim(rng, partition_cls, offsets, offsets[-1] + 1, aborted_txns(seed, offsets), check_durable=check_durable)
    sim.members = [Member(f"m{i}") for i in range(rng.randint(2, 5))]
    for _ in range(steps):
        sim.step()
        if sim.violations:
            return sim
    sim.settle()
    return sim


@pytest.mark.parametrize("chunk", range(0, seeds(200), 25))
def test_random_crowds_keep_the_share_group_invariants(chunk: int) -> None:
    for seed in range(chunk, min(chunk + 25, seeds(200))):
        sim = run(seed)
        assert not sim.violations, f"seed {seed}: {sim.violations[:5]}"


def test_the_crowd_exercises_the_faults() -> None:
    """The faults the checkers are meant to face do happen."""
    sims = [run(s) for s in range(10)]
    assert sum(s.failovers for s in sims) >= 10
    assert sum(s.coordinator_failovers for s in sims) >= 3
    assert sum(s.fenced for s in sims) >= 1, "no zombie leader was ever fenced"
    assert sum(s.refused_acks for s in sims) >= 10
    assert any(c == LIMIT for s in sims for c in s.deliveries.values()), "no record reached the delivery limit"
    assert sum(len(s.aborted) for s in sims) >= 10, "too few records of aborted transactions"


class ForgetsTheOwner(SharePartition):
    """A deliberate bug: an acknowledgement is taken from whoever sends it, holder or not."""

    def acknowledge(self, now_ms: int, member: str, acks: list[AckBatch]) -> tuple[int, list[PartitionEffect]]:  # type: ignore[override]
        self.tick(now_ms)
        for b in acks:
            for off in range(b.first_offset, b.last_offset + 1):
                rec = self.inflight.get(off)
                if rec is not None and rec.state in (ACQUIRED, AVAILABLE):
                    rec.state, rec.member = ACQUIRED, member
        return super().acknowledge(now_ms, member, acks)


class ForgetsAcceptedOnFailover(SharePartition):
    """A deliberate bug: a new leader treats acknowledged records as available."""

    @classmethod
    def from_state(
        cls, config: SharePartitionConfig, state: PartitionState, leader_epoch: int, log_start_offset: int = 0
    ) -> tuple[SharePartition, list[PartitionEffect]]:
        batches = tuple(
            replace(b, delivery_state=AVAILABLE) if b.delivery_state == ACKNOWLEDGED else b for b in state.batches
        )
        return super().from_state(config, replace(state, batches=batches), leader_epoch, log_start_offset)


class ForgetsDeliveryAttempts(SharePartition):
    """A deliberate bug (Kafka 4.0's choice): acquisitions are not persisted, so counts restart on failover."""

    def acquire(  # type: ignore[override]
        self,
        now_ms: int,
        member: str,
        batches: list[tuple[int, int]],
        max_records: int,
        fetched_end: int | None = None,
        aborted: list[tuple[int, int]] = (),  # type: ignore[assignment]
    ) -> tuple[list[Acquired], list[PartitionEffect]]:
        got, eff = super().acquire(now_ms, member, batches, max_records, fetched_end, aborted)
        return got, [e for e in eff if not isinstance(e, StateWrite)]


class DeliversAborted(SharePartition):
    """A deliberate bug: aborted transactions' records are acquired as any other (read_uncommitted's way)."""

    def acquire(  # type: ignore[override]
        self,
        now_ms: int,
        member: str,
        batches: list[tuple[int, int]],
        max_records: int,
        fetched_end: int | None = None,
        aborted: list[tuple[int, int]] = (),  # type: ignore[assignment]
    ) -> tuple[list[Acquired], list[PartitionEffect]]:
        return super().acquire(now_ms, member, sorted([*batches, *aborted]), max_records, fetched_end)


@pytest.mark.parametrize(
    ("bug", "symptom", "check_durable"),
    [
        (ForgetsTheOwner, "no longer owns", True),
        (ForgetsAcceptedOnFailover, "accepted but delivered again", False),
        (ForgetsAcceptedOnFailover, "coordinator state", True),
        (ForgetsDeliveryAttempts, "delivered with count", False),
        (ForgetsDeliveryAttempts, "coordinator state", True),
        (DeliversAborted, "of an aborted transaction delivered", True),
    ],
)
def test_the_checkers_catch_a_broken_core(bug: type[SharePartition], symptom: str, check_durable: bool) -> None:
    caught = [s for s in range(30) if any(symptom in v for v in run(s, bug, check_durable=check_durable).violations)]
    assert caught, f"no seed caught {bug.__name__}"
