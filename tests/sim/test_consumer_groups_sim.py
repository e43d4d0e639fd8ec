"""The KIP-848 consumer-group core under a simulated crowd: consumers that join, leave, crash and restart
(static ones under a new member id), lose heartbeats and answers, revoke late or never, and commit offsets
whose delivery can lag; topics that grow and appear (some consumers subscribe by regex); and a coordinator
that fails over, its successor replaying the records written so far (sometimes losing the call it was in
the middle of, whose records were not written and whose answer was never sent). All on a virtual clock.

Some consumers behave as librdkafka does (``rdkafka``): a heartbeat that times out is not followed by a full
request (only an error from the coordinator makes the next one full); the owned partitions are said only when
acknowledging an assignment applied (its callbacks run some time after the answer) or in a full request,
which lists the last acknowledged assignment, not the one being applied; an assignment equal to the one it
has or applies is ignored.

The checkers, after every step:

- no partition has two owners among the group's members, both as the coordinator granted them (what each
  member's last accepted heartbeat said it owns, plus what it was last told it may own) and as the
  consumers actually hold them;
- the member epoch each member is told only grows;
- an offset commit is accepted only from a member that still owns the partition, and every accepted commit
  survives a failover (the successor's offsets are exactly the accepted ones);
- once the faults stop, the group converges: Stable at its group epoch, every subscribed partition owned by
  exactly one consumer, each consumer holding exactly its target.

Four deliberate bugs must be caught: handing a partition over before its owner released it, taking a
librdkafka full request's owned list as the truth, accepting commits whatever their epoch, and acknowledging
commits without writing them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from epochlog.codes import Err
from epochlog.groups.consumer.coordinator import ConsumerGroupCoordinator
from epochlog.groups.consumer.messages import Effect, HeartbeatRequest, HeartbeatResponse
from epochlog.groups.consumer.model import (
    GROUP_STABLE,
    NO_PARTITIONS,
    Assignment,
    ConsumerGroupConfig,
    Member,
    TopicPartition,
)
from epochlog.groups.consumer.records import RECORD_TYPES, Record
from tests.sweep import seeds

pytestmark = pytest.mark.sim

SESSION = 10_000
INTERVAL = 2_000
REBALANCE = 8_000
G = "g"
CONFIG = ConsumerGroupConfig(session_timeout_ms=SESSION, heartbeat_interval_ms=INTERVAL)


@dataclass
class Consumer:
    name: str
    instance: str | None
    topics: tuple[str, ...]
    regex: str | None
    assignor: str | None
    incarnation: int = 0
    epoch: int = 0
    joined: bool = False
    gone: bool = False
    owned: set[TopicPartition] = field(default_factory=set)
    revoking: set[TopicPartition] = field(default_factory=set)  # told to give up, not yet given up
    positions: dict[TopicPartition, int] = field(default_factory=dict)
    next_heartbeat: int = 0
    full: bool = True  # the next heartbeat carries every field (after a join or a lost answer)
    cut_off_until: int = 0
    slow_revoker: bool = False  # sits on revoked partitions for longer than its rebalance timeout
    rdkafka: bool = False
    # librdkafka's reconciliation: the last acknowledged assignment, the one being applied (its callbacks
    # run at ``apply_at``; then it is acknowledged), and the one received meanwhile.
    acked: frozenset[TopicPartition] = frozenset()
    applying: frozenset[TopicPartition] | None = None
    apply_at: int = 0
    applied: bool = False
    next_target: frozenset[TopicPartition] | None = None

    @property
    def member_id(self) -> str:
        return f"{self.name}.{self.incarnation}"


@dataclass
class InFlightCommit:
    due: int
    consumer: Consumer
    member_id: str
    epoch: int
    offsets: dict[TopicPartition, int]


@dataclass
class Sim:
    rng: random.Random
    core_class: type[ConsumerGroupCoordinator]
    topics: dict[str, int]
    now: int = 0
    log: list[Record] = field(default_factory=list)
    consumers: list[Consumer] = field(default_factory=list)
    commits: list[InFlightCommit] = field(default_factory=list)
    accepted: dict[TopicPartition, int] = field(default_factory=dict)
    # The coordinator's grants, per member id: what its last accepted heartbeat said it owns, and what it
    # was last told it may own.
    said_owned: dict[str, Assignment] = field(default_factory=dict)
    told: dict[str, Assignment] = field(default_factory=dict)
    epochs: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    faults: bool = True
    failovers: int = 0
    core: ConsumerGroupCoordinator = field(init=False)

    def __post_init__(self) -> None:
        self.core = self.core_class(G, CONFIG, self.topics)

    def fail(self, what: str) -> None:
        self.violations.append(f"t={self.now}: {what}")

    def write(self, effects: list[Effect]) -> None:
        self.log.extend(e for e in effects if isinstance(e, RECORD_TYPES))

    def failover(self) -> None:
        self.failovers += 1
        self.core = self.core_class.from_records(G, self.log, self.now, CONFIG, self.topics)
        for c in self.consumers:
            c.full = True  # NOT_COORDINATOR or a broken connection: the next heartbeat says everything
        if self.core.group.offsets != self.accepted:
            lost = {tp: o for tp, o in self.accepted.items() if self.core.group.offsets.get(tp) != o}
            self.fail(f"failover lost committed offsets {lost}")

    # -- the coordinator's grants and the consumers' holdings -----------------------------------
    def check_ownership(self) -> None:
        members = self.core.group.members
        granted: dict[TopicPartition, str] = {}
        held: dict[TopicPartition, str] = {}
        for mid in members:
            for tp in self.said_owned.get(mid, NO_PARTITIONS) | self.told.get(mid, NO_PARTITIONS):
                if granted.setdefault(tp, mid) != mid:
                    self.fail(f"{tp} granted to both {granted[tp]} and {mid}")
        for c in self.consumers:
            if c.member_id in members and c.joined:
                for tp in c.owned:
                    if held.setdefault(tp, c.member_id) != c.member_id:
                        self.fail(f"{tp} held by both {held[tp]} and {c.member_id}")

    # -- a consumer's heartbeat -----------------------------------------------------------------
    def reachable(self, c: Consumer) -> bool:
        return c.cut_off_until <= self.now and not (self.faults and self.rng.random() < 0.05)

    def heartbeat(self, c: Consumer, epoch: int | None = None) -> None:
        epoch = c.epoch if epoch is None else epoch
        full = c.full or epoch == 0
        owned: Assignment | None = frozenset(c.owned) if epoch >= 0 else None
        ack = c.rdkafka and c.applied and epoch > 0
        if c.rdkafka and epoch > 0:
            owned = c.applying if ack else c.acked if full else None
        req = HeartbeatRequest(
            G,
            c.member_id,
            epoch,
            instance_id=c.instance if full or epoch < 0 else None,
            rebalance_timeout_ms=REBALANCE if full else -1,
            subscribed_topic_names=c.topics if full else None,
            subscribed_topic_regex=c.regex if full else None,
            server_assignor=c.assignor if full else None,
            owned=owned,
            client_id=c.name,
        )
        c.next_heartbeat = self.now + INTERVAL
        if not self.reachable(c):
            # A timed-out request: the next one says everything again (librdkafka: only if the connection
            # broke, else it just sends the next one).
            c.full = not c.rdkafka or self.rng.random() < 0.5
            return
        if self.faults and self.rng.random() < 0.01:
            # The coordinator dies in the middle of this call: its records are not written, no answer.
            self.failover()
            c.full = True
            return
        resp, effects = self.core.heartbeat(self.now, req)
        self.write(effects)
        if resp.error_code == Err.NONE and epoch < 0:
            # It left having given up everything; a static member's slot keeps its assignment for later.
            kept = self.core.group.members.get(c.member_id)
            self.said_owned[c.member_id] = NO_PARTITIONS
            self.told[c.member_id] = kept.assigned if kept is not None else NO_PARTITIONS
        if resp.error_code == Err.NONE and epoch >= 0:
            mid = resp.member_id or c.member_id
            if req.owned is not None or mid not in self.said_owned:
                self.said_owned[mid] = req.owned or NO_PARTITIONS  # saying nothing leaves what it said
            if resp.assignment is not None:
                self.told[mid] = resp.assignment
            if resp.member_epoch < self.epochs.get(mid, 0):
                self.fail(f"{mid} told epoch {resp.member_epoch} after {self.epochs[mid]}")
            self.epochs[mid] = max(self.epochs.get(mid, 0), resp.member_epoch)
        if self.faults and self.rng.random() < 0.05:
            c.full = not c.rdkafka  # the answer is lost
            return
        self.on_answer(c, resp, epoch, ack)

    def on_answer(self, c: Consumer, resp: HeartbeatResponse, epoch: int, ack: bool = False) -> None:
        if epoch < 0:
            return
        if resp.error_code in (Err.FENCED_MEMBER_EPOCH, Err.UNKNOWN_MEMBER_ID):
            self.lose_everything(c)  # Kafka's onPartitionsLost: no commit, rejoin at epoch 0
            return
        if resp.error_code != Err.NONE:
            c.full = True
            return
        c.joined, c.epoch, c.full = True, resp.member_epoch, False
        if c.rdkafka:
            self.rdkafka_answer(c, resp.assignment, ack)
            return
        if resp.assignment is None:
            return
        c.revoking = c.owned - resp.assignment
        for tp in resp.assignment - c.owned:
            c.owned.add(tp)
            c.positions[tp] = self.core.group.offsets.get(tp, 0)  # OffsetFetch

    def rdkafka_answer(self, c: Consumer, assignment: Assignment | None, ack: bool) -> None:
        if assignment is not None and assignment != (c.acked if c.applying is None else c.applying):
            c.next_target = assignment
        if ack and c.applying is not None:
            c.acked, c.applying, c.applied = c.applying, None, False
        if c.applying is None and c.next_target is not None:
            if c.next_target != c.acked:
                c.applying, c.apply_at = c.next_target, self.now + self.rng.randint(0, 3 * INTERVAL)
            c.next_target = None

    def rdkafka_apply(self, c: Consumer) -> None:
        """The callbacks of the assignment being applied: revoke (committing first), then assign; then the
        acknowledgement goes out at once."""
        assert c.applying is not None
        gone = c.owned - c.applying
        self.commit(c, gone)
        self.deliver_commits()
        c.owned -= gone
        for tp in gone:
            c.positions.pop(tp, None)
        for tp in c.applying - c.owned:
            c.owned.add(tp)
            c.positions[tp] = self.core.group.offsets.get(tp, 0)
        c.applied = True
        self.heartbeat(c)

    def lose_everything(self, c: Consumer) -> None:
        c.acked, c.applying, c.applied, c.next_target = frozenset(), None, False, None
        c.owned.clear()
        c.revoking.clear()
        c.positions.clear()
        c.epoch, c.joined, c.full = 0, False, True

    # -- consuming and committing ---------------------------------------------------------------
    def commit(self, c: Consumer, tps: set[TopicPartition], delay: int = 0) -> None:
        if not tps:
            return
        offsets = {tp: c.positions[tp] for tp in tps}
        self.commits.append(InFlightCommit(self.now + delay, c, c.member_id, c.epoch, offsets))

    def deliver_commits(self) -> None:
        due = [x for x in self.commits if x.due <= self.now]
        self.commits = [x for x in self.commits if x.due > self.now]
        members = self.core.group.members
        for x in due:
            err, effects = self.core.commit_offsets(self.now, x.member_id, x.epoch, x.offsets)
            if err != Err.NONE:
                continue
            self.write(effects)
            grants = self.said_owned.get(x.member_id, NO_PARTITIONS) | self.told.get(x.member_id, NO_PARTITIONS)
            if x.member_id in members:
                # Still being revoked: a librdkafka member lets go of one partition while it applies others.
                grants |= members[x.member_id].pending_revocation
            for tp, off in x.offsets.items():
                if x.member_id not in members or tp not in grants:
                    self.fail(f"commit of {tp}@{off} accepted from {x.member_id}, which no longer owns it")
                self.accepted[tp] = off

    def consume(self, c: Consumer) -> None:
        for tp in c.owned:
            c.positions[tp] = c.positions.get(tp, 0) + self.rng.randint(0, 5)
        if self.rng.random() < 0.3:
            lag = self.rng.randint(0, 3 * REBALANCE) if self.faults and self.rng.random() < 0.2 else 0
            self.commit(c, set(c.owned), lag)

    def revoke(self, c: Consumer) -> None:
        """onPartitionsRevoked: commit the revoked partitions' positions, give them up, say so at once."""
        gone = c.revoking & c.owned
        self.commit(c, gone)
        self.deliver_commits()
        c.owned -= gone
        for tp in gone:
            c.positions.pop(tp, None)
        c.revoking.clear()
        self.heartbeat(c)

    # -- the crowd ------------------------------------------------------------------------------
    def chaos(self, c: Consumer) -> None:
        x = self.rng.random()
        if x < 0.01 and c.joined:
            # A clean leave: commit, give up everything; a static member says it will be back.
            self.commit(c, set(c.owned))
            self.deliver_commits()
            c.owned.clear()
            self.heartbeat(c, -2 if c.instance is not None and self.rng.random() < 0.7 else -1)
            self.restart(c)
        elif x < 0.02:
            self.restart(c)  # a crash: the old member times out (or its static slot waits)
        elif x < 0.03:
            c.cut_off_until = self.now + self.rng.randint(0, 2 * SESSION)

    def restart(self, c: Consumer) -> None:
        self.lose_everything(c)
        c.incarnation += 1
        c.slow_revoker = self.rng.random() < 0.1

    def change_topics(self) -> None:
        x = self.rng.random()
        if x < 0.5:
            t = self.rng.choice(sorted(self.topics))
            self.topics[t] += self.rng.randint(1, 3)
        else:
            self.topics[f"t{len(self.topics)}"] = self.rng.randint(1, 4)
        self.write(self.core.topics_changed(self.now, self.topics))

    def step(self) -> None:
        self.now += self.rng.randint(50, 800)
        if self.faults and self.rng.random() < 0.01:
            self.failover()
        if self.faults and self.rng.random() < 0.01:
            self.change_topics()
        self.write(self.core.tick(self.now))
        self.deliver_commits()
        for c in self.rng.sample(self.consumers, len(self.consumers)):
            if c.gone:
                continue
            if c.applying is not None and not c.applied and self.now >= c.apply_at and c.joined:
                if not (c.slow_revoker and self.faults and c.owned - c.applying):
                    self.rdkafka_apply(c)
            elif c.revoking and not (c.slow_revoker and self.faults):
                if self.rng.random() < 0.5 or not self.faults:
                    self.revoke(c)
            elif not c.joined and c.cut_off_until <= self.now:
                self.heartbeat(c, 0)
            elif c.joined and self.now >= c.next_heartbeat:
                self.heartbeat(c)
            if c.joined:
                self.consume(c)
            if self.faults:
                self.chaos(c)
            self.check_ownership()

    def settle(self) -> None:
        self.faults = False
        for c in self.consumers:
            c.cut_off_until = 0
        deadline = self.now + 2 * SESSION + 3 * REBALANCE + 10 * INTERVAL
        while self.now < deadline and not self.violations:
            self.step()
        self.commits.clear()
        g = self.core.group
        if g.state != GROUP_STABLE:
            self.fail(f"not settled: {g.state}, epochs {g.group_epoch}/{g.assignment_epoch}")
        live = {c.member_id: c for c in self.consumers if not c.gone}
        if set(g.members) != set(live):
            self.fail(f"members {sorted(g.members)}, live consumers {sorted(live)}")
        expected = {(t, p) for t, n in g.subscription_metadata.items() for p in range(n)}
        holders: dict[TopicPartition, str] = {}
        for mid, c in live.items():
            m = g.members.get(mid)
            if m is None:
                continue
            if c.epoch != g.group_epoch or m.member_epoch != g.group_epoch:
                self.fail(f"{mid} at epoch {c.epoch} (coordinator: {m.member_epoch}), group at {g.group_epoch}")
            if frozenset(c.owned) != g.target.get(mid) or m.assigned != g.target.get(mid):
                self.fail(f"{mid} holds {sorted(c.owned)}, target {sorted(g.target.get(mid, ()))}")
            for tp in c.owned:
                holders[tp] = mid
        if set(holders) != expected:
            self.fail(f"unowned partitions {sorted(expected - set(holders))}")


def run(seed: int, core_class: type[ConsumerGroupCoordinator] = ConsumerGroupCoordinator, steps: int = 300) -> Sim:
    rng = random.Random(seed)
    topics = {"t0": rng.randint(1, 6), "t1": rng.randint(1, 6), "other": 3}
    sim = Sim(rng, core_class, topics)
    for i in range(rng.randint(2, 6)):
        regex = "t[0-9]+" if rng.random() < 0.3 else None
        names = () if regex else tuple(rng.sample(["t0", "t1", "other"], rng.randint(1, 3)))
        assignor = rng.choice([None, "uniform", "range"])
        instance = f"i{i}" if rng.random() < 0.4 else None
        sim.consumers.append(Consumer(f"c{i}", instance, names, regex, assignor, rdkafka=rng.random() < 0.5))
    for _ in range(steps):
        sim.step()
        if sim.violations:
            return sim
    sim.failover()  # one last takeover: everything acknowledged so far is in the records
    if not sim.violations:
        sim.settle()
    return sim


@pytest.mark.parametrize("chunk", range(0, seeds(80), 20))
def test_random_crowds_keep_the_consumer_group_invariants(chunk: int) -> None:
    for seed in range(chunk, min(chunk + 20, seeds(80))):
        sim = run(seed)
        assert not sim.violations, f"seed {seed}: {sim.violations[:5]}"


def test_the_crowd_exercises_failovers_revocations_and_regexes() -> None:
    """The faults the checkers are meant to face do happen."""
    sims = [run(s) for s in range(10)]
    assert sum(s.failovers for s in sims) >= 10
    records = [type(r).__name__ for s in sims for r in s.log]
    assert "ConsumerGroupCurrentMemberAssignment" in records and "OffsetCommit" in records
    revoking = [r for s in sims for r in s.log if getattr(r, "pending_revocation", None)]
    assert revoking, "no member was ever asked to revoke"


class HandsOverBeforeRelease(ConsumerGroupCoordinator):
    """A deliberate bug: every partition looks free, so the new owner gets it while the old one holds it."""

    def owner_epoch(self, tp: TopicPartition) -> int:
        return -1


class TrustsAnyOwnedList(ConsumerGroupCoordinator):
    """A deliberate bug (Kafka's rule): whatever a heartbeat lists as owned is all the member may hold, also
    in a librdkafka full request sent while it applies partitions it has not acknowledged."""

    @staticmethod
    def _owned(m: Member, req: HeartbeatRequest) -> Assignment | None:
        m.unconfirmed = NO_PARTITIONS
        return req.owned


class CommitsWhateverTheEpoch(ConsumerGroupCoordinator):
    """A deliberate bug: a commit from a known member is accepted at any epoch."""

    def commit_offsets(
        self, now_ms: int, member_id: str, member_epoch: int, offsets: dict[TopicPartition, int]
    ) -> tuple[int, list[Effect]]:
        m = self.group.members.get(member_id)
        return super().commit_offsets(now_ms, member_id, m.member_epoch if m else member_epoch, offsets)


class CommitsWithoutWriting(ConsumerGroupCoordinator):
    """A deliberate bug: a commit is applied in memory and acknowledged, but no record is written."""

    def commit_offsets(
        self, now_ms: int, member_id: str, member_epoch: int, offsets: dict[TopicPartition, int]
    ) -> tuple[int, list[Effect]]:
        err, _ = super().commit_offsets(now_ms, member_id, member_epoch, offsets)
        return err, []


@pytest.mark.parametrize(
    ("bug", "symptom"),
    [
        (HandsOverBeforeRelease, "both"),
        (TrustsAnyOwnedList, "held by both"),
        (CommitsWhateverTheEpoch, "no longer owns"),
        (CommitsWithoutWriting, "lost committed offsets"),
    ],
)
def test_the_checkers_catch_a_broken_core(bug: type[ConsumerGroupCoordinator], symptom: str) -> None:
    caught = [s for s in range(40) if any(symptom in v for v in run(s, bug).violations)]
    assert caught, f"no seed caught {bug.__name__}"
