"""The group membership core under a simulated crowd: consumers that join, leave, crash, restart (static
members under a new id), lose heartbeats and responses, commit with whatever generation they believe in, and
a coordinator whose group writes are slow and sometimes fail, all on a virtual clock. The checkers:

- every member told generation G hears the same leader and protocol, and is in the leader's member list;
- a member's SyncGroup for generation G returns what G's leader assigned to it (to its slot, for a static
  member that took over under a new id), and no two slots get the same assignment;
- generations announced only grow;
- no member of an older generation can sync, heartbeat or commit once a newer one was announced, nor the
  old incarnation of a static member once its restart joined (it is fenced);
- once the faults stop, the group settles: Stable, with exactly the live consumers, all at its generation.

A core with the generation check taken out (a deliberate bug) must be caught.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

import pytest

from epochlog.codes import Err
from epochlog.groups.effects import (
    AnswerJoin,
    AnswerSync,
    Effect,
    JoinRequest,
    JoinResult,
    MembershipConfig,
    PersistGroup,
    SyncResult,
)
from epochlog.groups.membership import GroupMembership
from epochlog.groups.model import STABLE, Group
from tests.sweep import seeds

pytestmark = pytest.mark.sim

SESSION = 10_000
REBALANCE = 20_000
HEARTBEAT_EVERY = 3_000


@dataclass
class Consumer:
    name: str
    instance: str | None
    member_id: str = ""
    generation: int = -1
    phase: str = "idle"  # idle | joining | syncing | stable | fenced | gone
    token: int | None = None  # the parked JoinGroup or SyncGroup
    next_heartbeat: int = 0
    cut_off_until: int = 0  # a network partition: nothing it sends arrives


@dataclass
class Sim:
    rng: random.Random
    core: GroupMembership
    now: int = 0
    consumers: list[Consumer] = field(default_factory=list)
    writes: list[tuple[int, PersistGroup, bool]] = field(default_factory=list)  # (due, write, succeeds)
    violations: list[str] = field(default_factory=list)
    # What was announced: per generation, its leader and protocol, the leader's member list and assignment.
    leaders: dict[int, tuple[str, str | None]] = field(default_factory=dict)
    member_lists: dict[int, set[str]] = field(default_factory=dict)
    instances: dict[str, str] = field(default_factory=dict)  # member id -> group.instance.id
    assigned: dict[int, dict[str, bytes]] = field(default_factory=dict)
    received: dict[int, dict[bytes, str]] = field(default_factory=dict)  # assignment -> slot that got it
    newest: int = 0
    slot_ids: dict[str, str] = field(default_factory=dict)  # group.instance.id -> its newest member id
    replaced: set[str] = field(default_factory=set)  # member ids a restarted static member took over from
    faults: bool = True

    def fail(self, what: str) -> None:
        self.violations.append(f"t={self.now}: {what}")

    # -- the coordinator side -----------------------------------------------------------------
    def effects(self, out: list[Effect]) -> None:
        for e in out:
            if isinstance(e, AnswerJoin):
                self.on_join(e.token, e.result)
            elif isinstance(e, AnswerSync):
                self.on_sync(e.token, e.result)
            elif isinstance(e, PersistGroup):
                ok = not (self.faults and self.rng.random() < 0.05)
                self.writes.append((self.now + self.rng.randint(0, 400), e, ok))

    def complete_writes(self) -> None:
        due = [w for w in self.writes if w[0] <= self.now]
        self.writes = [w for w in self.writes if w[0] > self.now]
        for _, w, ok in due:
            if w.confirm:
                s = w.snapshot
                self.effects(self.core.assignment_written(s.group_id, s.generation, ok, self.now))

    def group(self) -> Group | None:
        return self.core.groups.get("g")

    # -- answers ------------------------------------------------------------------------------
    def owner(self, token: int) -> Consumer | None:
        return next((c for c in self.consumers if c.token == token), None)

    def on_join(self, token: int, r: JoinResult) -> None:
        c = self.owner(token)
        if c is not None and c.instance is not None and r.error_code == Err.NONE:
            self.instances[r.member_id] = c.instance
        if r.error_code == Err.NONE:
            self.check_join(r)
        if c is None:
            return  # an answer to a request its sender gave up on
        c.token = None
        if r.error_code == Err.NONE:
            c.member_id, c.generation, c.phase = r.member_id, r.generation_id, "syncing"
            assignments = {}
            if r.leader == r.member_id:
                assignments = {m: f"{r.generation_id}:{i}".encode() for i, (m, _, _) in enumerate(r.members)}
                self.assigned.setdefault(r.generation_id, assignments)
            step = self.core.sync("g", c.generation, c.member_id, c.instance, None, None, assignments, self.now)
            c.token = step.token
            self.effects(step.effects)
        elif r.error_code == Err.MEMBER_ID_REQUIRED:
            c.member_id = r.member_id
            self.join(c)
        else:
            self.on_error(c, r.error_code)

    def on_sync(self, token: int, r: SyncResult) -> None:
        c = self.owner(token)
        if c is None:
            return
        c.token = None
        if r.error_code != Err.NONE:
            return self.on_error(c, r.error_code)
        self.check_current(c, "synced")
        mine = self.assigned.get(c.generation, {}).get(c.member_id)
        if mine is None:  # a static member that took over a slot: the slot's assignment
            slot = [m for m in self.assigned.get(c.generation, {}) if self.instances.get(m) == c.instance]
            mine = self.assigned[c.generation][slot[0]] if c.instance and slot else None
        if r.assignment != mine:
            self.fail(f"{c.member_id} synced generation {c.generation} with {r.assignment!r}, leader gave {mine!r}")
        slot_key = c.instance or c.member_id
        holder = self.received.setdefault(c.generation, {}).setdefault(r.assignment, slot_key)
        if r.assignment and holder != slot_key:
            self.fail(f"generation {c.generation}: {r.assignment!r} given to {holder} and {slot_key}")
        c.phase = "stable"

    def on_error(self, c: Consumer, code: int) -> None:
        if code == Err.FENCED_INSTANCE_ID:
            c.phase = "fenced"
            return
        if code == Err.UNKNOWN_MEMBER_ID:
            c.member_id = ""
        c.phase = "idle"

    # -- the checkers ------------------------------------------------------------------------
    def check_join(self, r: JoinResult) -> None:
        gen = r.generation_id
        if gen < self.newest:
            self.fail(f"generation {gen} announced after {self.newest}")
        self.newest = max(self.newest, gen)
        seen = self.leaders.setdefault(gen, (r.leader, r.protocol_name))
        if seen != (r.leader, r.protocol_name):
            self.fail(f"generation {gen}: leader/protocol {seen} and {(r.leader, r.protocol_name)}")
        if r.members:
            listed = {m for m, _, _ in r.members}
            if self.member_lists.setdefault(gen, listed) != listed:
                self.fail(f"generation {gen}: two member lists")
            for m, iid, _ in r.members:
                if iid is not None:
                    self.instances[m] = iid
        listed = self.member_lists.get(gen)
        iid = self.instances.get(r.member_id)
        if iid is not None:
            old = self.slot_ids.get(iid)
            if old is not None and old != r.member_id:
                self.replaced.add(old)
            self.slot_ids[iid] = r.member_id
        if listed is not None and r.member_id not in listed:
            if iid is None or iid not in {self.instances.get(m) for m in listed}:
                self.fail(f"{r.member_id} told generation {gen} but not in its member list {sorted(listed)}")

    def check_current(self, c: Consumer, what: str) -> None:
        if c.member_id in self.replaced:
            self.fail(f"{c.member_id}, replaced by a restart of {c.instance}, {what}")
        if c.generation < self.newest:
            self.fail(f"{c.member_id} of generation {c.generation} {what} after generation {self.newest}")

    # -- the consumers ------------------------------------------------------------------------
    def join(self, c: Consumer) -> None:
        req = JoinRequest(
            "g",
            c.member_id,
            c.instance,
            c.name,
            "/sim",
            SESSION,
            REBALANCE,
            "consumer",
            [("range", c.name.encode()), ("sticky", b"")] if self.rng.random() < 0.5 else [("range", b"r")],
            require_known_member_id=self.rng.random() < 0.5,
        )
        c.phase = "joining"
        c.next_heartbeat = self.now + HEARTBEAT_EVERY
        step = self.core.join(req, self.now)
        c.token = step.token
        self.effects(step.effects)

    def reachable(self, c: Consumer) -> bool:
        return c.cut_off_until <= self.now and not (self.faults and self.rng.random() < 0.1)

    def heartbeat(self, c: Consumer) -> None:
        c.next_heartbeat = self.now + HEARTBEAT_EVERY
        if not self.reachable(c):
            return
        code = self.core.heartbeat("g", c.generation, c.member_id, c.instance, self.now)
        if code in (Err.NONE, Err.REBALANCE_IN_PROGRESS):
            self.check_current(c, "heartbeated")
        if code == Err.REBALANCE_IN_PROGRESS:
            self.join(c)
        elif code != Err.NONE:
            self.on_error(c, code)

    def commit(self, c: Consumer) -> None:
        """An offset commit's membership check, as the driver makes it; consumers commit with whatever
        generation they hold, also while they rejoin (from their revocation callback)."""
        g = self.group()
        if g is None or not c.member_id or not self.reachable(c):
            return
        if self.core.validate_member(g, c.member_id, c.instance, c.generation) == Err.NONE:
            self.check_current(c, "committed")
            self.core.touch("g", c.member_id, self.now)

    def chaos(self, c: Consumer) -> None:
        x = self.rng.random()
        if x < 0.02 and c.phase == "stable":
            c.token = None
            self.effects(self.core.leave("g", [(c.member_id, c.instance)], self.now).effects)
            c.member_id, c.generation, c.phase = "", -1, "idle"
        elif x < 0.04:
            # A crash: a static consumer restarts under its instance id (the old one lingers, a zombie that
            # keeps committing with its old id); a dynamic one starts afresh and its old member times out.
            if c.instance is not None:
                zombie = Consumer(c.name + "'", c.instance, c.member_id, c.generation, "stable")
                zombie.cut_off_until = self.now  # it is reachable, only out of date
                self.consumers.append(zombie)
            c.member_id, c.generation, c.phase, c.token = "", -1, "idle", None
        elif x < 0.06:
            c.cut_off_until = self.now + self.rng.randint(0, 2 * SESSION)
        elif x < 0.08 and c.phase in ("joining", "syncing"):
            c.token, c.phase = None, "idle"  # the response is lost: it will join again
        elif x < 0.2:
            self.commit(c)

    def step(self) -> None:
        self.now += self.rng.randint(50, 1500)
        self.complete_writes()
        before = g.generation if (g := self.group()) else 0
        self.effects(self.core.tick(self.now))
        for c in list(self.consumers):
            if c.phase in ("gone", "fenced"):
                continue
            if c.name.endswith("'"):  # a zombie: commits and heartbeats with its stale id for a while
                if self.rng.random() < 0.3:
                    self.commit(c)
                if self.rng.random() < 0.1:
                    c.phase = "gone"
                continue
            if c.phase == "idle" and c.cut_off_until <= self.now:
                self.join(c)
            elif c.phase == "stable" and self.now >= c.next_heartbeat:
                self.heartbeat(c)
            if self.faults:
                self.chaos(c)
        g = self.group()
        if g is not None and g.generation < before:
            self.fail(f"the group's generation went back from {before} to {g.generation}")

    def settle(self) -> None:
        """The faults stop; the consumers that are still alive must end up as the Stable group's members."""
        self.faults = False
        for c in self.consumers:
            c.cut_off_until = 0
            if c.name.endswith("'"):
                c.phase = "gone"
        deadline = self.now + 4 * REBALANCE + 2 * SESSION
        while self.now < deadline:
            self.step()
        g = self.group()
        live = [c for c in self.consumers if c.phase not in ("gone", "fenced")]
        if g is None or g.state != STABLE:
            self.fail(f"not settled: {g.state if g else None}")
            return
        if set(g.members) != {c.member_id for c in live}:
            self.fail(f"settled with members {sorted(g.members)}, live consumers {[c.member_id for c in live]}")
        for c in live:
            if c.phase != "stable" or c.generation != g.generation:
                self.fail(f"{c.name} settled {c.phase} at generation {c.generation}, group at {g.generation}")


def run(seed: int, core_class: type[GroupMembership] = GroupMembership, steps: int = 400) -> list[str]:
    rng = random.Random(seed)
    ids = itertools.count(1)
    delay = rng.choice([0, 0, 3000])
    core = core_class(MembershipConfig(group_initial_rebalance_delay_ms=delay), lambda cid: f"{cid}-{next(ids)}")
    sim = Sim(rng, core)
    for i in range(rng.randint(2, 6)):
        sim.consumers.append(Consumer(f"c{i}", f"i{i}" if rng.random() < 0.4 else None))
    for _ in range(steps):
        sim.step()
        if sim.violations:
            return sim.violations
    sim.settle()
    return sim.violations


@pytest.mark.parametrize("chunk", range(0, seeds(200), 50))
def test_random_crowds_keep_the_membership_invariants(chunk: int) -> None:
    for seed in range(chunk, min(chunk + 50, seeds(200))):
        bad = run(seed)
        assert not bad, f"seed {seed}: {bad[:5]}"


class NoGenerationCheck(GroupMembership):
    """A deliberate bug: members are not checked against the current generation."""

    def validate_member(self, g: Group | None, member_id: str, instance_id: str | None, generation_id: int) -> int:
        return super().validate_member(g, member_id, instance_id, g.generation if g is not None else generation_id)


def test_the_checkers_catch_a_core_that_lets_an_older_generation_act() -> None:
    caught = [s for s in range(30) if any("after generation" in v for v in run(s, NoGenerationCheck))]
    assert caught, "no seed caught a member of an older generation acting"
