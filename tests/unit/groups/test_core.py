"""The membership core (epochlog.groups) on its own: events with now_ms in, effects out, no event loop."""

from __future__ import annotations

import itertools

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
    StateChanged,
    Step,
    SyncResult,
    WakeAt,
)
from epochlog.groups.membership import GroupMembership
from epochlog.groups.model import COMPLETING_REBALANCE, EMPTY, PREPARING_REBALANCE, STABLE

pytestmark = pytest.mark.unit

SESSION = 10_000
REBALANCE = 30_000


class Harness:
    """A core, and the answers its effects delivered so far, by token."""

    def __init__(self, delay_ms: int = 0) -> None:
        ids = itertools.count(1)
        self.core = GroupMembership(
            MembershipConfig(group_initial_rebalance_delay_ms=delay_ms), lambda cid: f"{cid}-{next(ids)}"
        )
        self.joins: dict[int, JoinResult] = {}
        self.syncs: dict[int, SyncResult] = {}
        self.persisted: list[PersistGroup] = []
        self.effects: list[Effect] = []

    def take(self, effects: list[Effect]) -> None:
        self.effects += effects
        for e in effects:
            if isinstance(e, AnswerJoin):
                assert e.token not in self.joins, "a request answered twice"
                self.joins[e.token] = e.result
            elif isinstance(e, AnswerSync):
                assert e.token not in self.syncs, "a request answered twice"
                self.syncs[e.token] = e.result
            elif isinstance(e, PersistGroup):
                self.persisted.append(e)

    def join(self, now: int, member_id: str = "", client: str = "c", instance: str | None = None, **kw: object) -> int:
        req = JoinRequest(
            str(kw.get("group", "g")),
            member_id,
            instance,
            client,
            "/h",
            int(kw.get("session", SESSION)),  # type: ignore[call-overload]
            REBALANCE,
            "consumer",
            kw.get("protocols", [("range", client.encode())]),  # type: ignore[arg-type]
            bool(kw.get("require_known", False)),
        )
        step = self.core.join(req, now)
        self.take(step.effects)
        return step.token

    def sync(self, now: int, r: JoinResult, assignments: dict[str, bytes] | None = None) -> int:
        step: Step = self.core.sync("g", r.generation_id, r.member_id, None, None, None, assignments or {}, now)
        self.take(step.effects)
        return step.token

    def write_all(self, now: int, ok: bool = True) -> None:
        """The driver's writes complete (in order)."""
        pending, self.persisted = self.persisted, []
        for p in pending:
            if p.confirm:
                self.take(self.core.assignment_written(p.snapshot.group_id, p.snapshot.generation, ok, now))

    def tick(self, now: int) -> None:
        self.take(self.core.tick(now))

    def run(self, start: int, end: int, heartbeats: list[tuple[str, int]]) -> None:
        """Tick every second from ``start`` to ``end``, the named (member, generation) heartbeating."""
        for now in range(start, end + 1, 1000):
            for mid, gen in heartbeats:
                self.core.heartbeat("g", gen, mid, None, now)
            self.tick(now)

    def stable(self, now: int = 0) -> JoinResult:
        t = self.join(now, client="a")
        r = self.joins[t]
        self.sync(now, r, {r.member_id: b"A"})
        self.write_all(now)
        assert self.core.groups["g"].state == STABLE
        return r


def test_first_join_completes_at_once_without_initial_delay() -> None:
    h = Harness()
    t = h.join(0, client="a")
    r = h.joins[t]
    assert (r.error_code, r.generation_id, r.leader, r.member_id) == (Err.NONE, 1, "a-1", "a-1")
    assert r.members == [("a-1", None, b"a")]
    assert h.core.groups["g"].state == COMPLETING_REBALANCE
    assert [e.state for e in h.effects if isinstance(e, StateChanged)] == [
        EMPTY,
        PREPARING_REBALANCE,
        COMPLETING_REBALANCE,
    ]


def test_sync_waits_for_the_assignment_to_be_durable() -> None:
    h = Harness()
    r = h.joins[h.join(0, client="a")]
    s = h.sync(1, r, {r.member_id: b"A"})
    assert s not in h.syncs and len(h.persisted) == 1 and h.persisted[0].confirm
    assert h.persisted[0].snapshot.members[0].assignment == b"A"
    h.write_all(2)
    assert h.syncs[s] == SyncResult(Err.NONE, "consumer", "range", b"A")
    assert h.core.groups["g"].state == STABLE


def test_a_failed_assignment_write_sends_the_members_back_to_join() -> None:
    h = Harness()
    r = h.joins[h.join(0, client="a")]
    s = h.sync(1, r, {r.member_id: b"A"})
    h.write_all(2, ok=False)
    assert h.syncs[s].error_code == Err.REBALANCE_IN_PROGRESS
    g = h.core.groups["g"]
    assert g.state == PREPARING_REBALANCE and g.members[r.member_id].assignment == b""


def test_a_late_write_of_an_older_generation_changes_nothing() -> None:
    h = Harness()
    a = h.joins[h.join(0, client="a")]
    h.sync(1, a, {a.member_id: b"A"})
    late = h.persisted
    h.persisted = []
    tb = h.join(2, client="b")  # moves the group on before the write completes
    ta = h.join(2, member_id=a.member_id, client="a")
    assert h.joins[ta].generation_id == h.joins[tb].generation_id == 2
    h.take(h.core.assignment_written("g", late[0].snapshot.generation, True, 3))
    assert h.core.groups["g"].state == COMPLETING_REBALANCE


def test_heartbeat_answers_by_state() -> None:
    h = Harness()
    r = h.joins[h.join(0, client="a")]
    assert h.core.heartbeat("g", 1, r.member_id, None, 1) == Err.NONE  # CompletingRebalance
    h.sync(1, r, {})
    h.write_all(1)
    assert h.core.heartbeat("g", 1, r.member_id, None, 2) == Err.NONE
    assert h.core.heartbeat("g", 0, r.member_id, None, 2) == Err.ILLEGAL_GENERATION
    assert h.core.heartbeat("g", 1, "x", None, 2) == Err.UNKNOWN_MEMBER_ID
    h.join(3, client="b")
    assert h.core.heartbeat("g", 1, r.member_id, None, 3) == Err.REBALANCE_IN_PROGRESS


def test_static_member_restart_fences_the_old_id() -> None:
    h = Harness()
    r = h.joins[h.join(0, client="a", instance="ia")]
    tb = h.join(0, client="b")
    r = h.joins[h.join(0, member_id=r.member_id, client="a", instance="ia")]
    b = h.joins[tb]
    h.sync(0, r, {})
    h.write_all(0)
    # The old incarnation parks a rejoin; the new one (no member id, same instance) takes its slot.
    t_old = h.join(1, member_id=r.member_id, client="a", instance="ia", protocols=[("range", b"new")])
    assert t_old not in h.joins
    t_new = h.join(2, client="a", instance="ia")
    assert h.joins[t_old].error_code == Err.FENCED_INSTANCE_ID
    assert t_new not in h.joins  # parked in the old slot, until b rejoins too
    h.join(3, member_id=b.member_id, client="b")
    new = h.joins[t_new]
    assert new.member_id != r.member_id and new.error_code == Err.NONE and new.generation_id == 3
    assert new.leader == new.member_id  # the slot kept its leadership under the new id
    assert h.core.heartbeat("g", 3, r.member_id, "ia", 3) == Err.FENCED_INSTANCE_ID
    assert h.core.heartbeat("g", 3, r.member_id, None, 3) == Err.UNKNOWN_MEMBER_ID
    assert h.core.validate_member(h.core.groups["g"], r.member_id, "ia", 3) == Err.FENCED_INSTANCE_ID
    out = h.core.leave("g", [(r.member_id, "ia")], 4)
    assert out.member_errors == [Err.FENCED_INSTANCE_ID]


def test_static_member_restart_in_a_stable_group_keeps_the_generation() -> None:
    h = Harness()
    a = h.joins[h.join(0, client="a", instance="ia")]
    tb = h.join(0, client="b", instance="ib")
    a = h.joins[h.join(0, member_id=a.member_id, client="a", instance="ia")]
    b = h.joins[tb]
    assert a.generation_id == b.generation_id == 2
    h.sync(0, a, {a.member_id: b"A", b.member_id: b"B"})
    h.write_all(0)
    t = h.join(5, client="b", instance="ib")
    b2 = h.joins[t]
    assert b2.generation_id == a.generation_id and h.core.groups["g"].state == STABLE
    assert [p.confirm for p in h.persisted] == [False]  # the new member id is recorded, not awaited
    s = h.sync(6, b2)
    assert h.syncs[s].assignment == b"B"


def test_session_expiry_removes_the_member_and_rebalances() -> None:
    h = Harness()
    r = h.stable()
    h.tick(SESSION - 1)
    assert r.member_id in h.core.groups["g"].members
    assert h.core.heartbeat("g", 1, r.member_id, None, SESSION - 1) == Err.NONE  # resets the session
    h.tick(2 * SESSION - 2)
    assert r.member_id in h.core.groups["g"].members
    h.tick(2 * SESSION - 1)
    g = h.core.groups["g"]
    assert not g.members and g.state == EMPTY and g.generation == 2
    assert [p.snapshot.members for p in h.persisted] == [()]


def test_a_parked_member_is_not_expired_by_its_session() -> None:
    h = Harness()
    a = h.stable()
    tb = h.join(0, client="b")  # the group prepares; a has not rejoined yet
    ta = h.join(1, member_id=a.member_id, client="a")  # both joined: generation 2 completes
    assert h.joins[ta].generation_id == h.joins[tb].generation_id == 2
    s = h.sync(2, h.joins[tb])  # b parks in SyncGroup, waiting for the leader, which heartbeats
    h.run(1000, 5 * SESSION, [(a.member_id, 2)])
    assert s not in h.syncs and h.joins[tb].member_id in h.core.groups["g"].members
    # Without the leader's heartbeats, its session ends; the rebalance sends b back to join.
    h.tick(6 * SESSION)
    assert h.syncs[s].error_code == Err.REBALANCE_IN_PROGRESS


def test_rebalance_timeout_drops_members_that_did_not_rejoin() -> None:
    h = Harness()
    a = h.stable()
    tb = h.join(100, client="b")
    # a keeps heartbeating (REBALANCE_IN_PROGRESS tells it to rejoin), but never does.
    h.run(1000, 100 + REBALANCE - 1, [(a.member_id, 1)])
    assert tb not in h.joins and a.member_id in h.core.groups["g"].members
    assert WakeAt(100 + REBALANCE) in h.effects
    h.tick(100 + REBALANCE)
    rb = h.joins[tb]
    assert rb.error_code == Err.NONE and rb.generation_id == 2 and rb.leader == rb.member_id
    assert list(h.core.groups["g"].members) == [rb.member_id]
    assert h.core.heartbeat("g", 1, a.member_id, None, 100 + REBALANCE) == Err.UNKNOWN_MEMBER_ID


def test_initial_rebalance_delay_is_extended_by_new_arrivals() -> None:
    h = Harness(delay_ms=3000)
    ta = h.join(0, client="a")
    tb = h.join(2000, client="b")
    h.tick(3000)  # the first delay ends, but b arrived inside it: another delay
    assert ta not in h.joins
    h.tick(5999)
    assert ta not in h.joins
    h.tick(6000)
    assert h.joins[ta].generation_id == h.joins[tb].generation_id == 1 and len(h.joins[ta].members) == 2


def test_member_id_required_and_the_pending_id_lapses() -> None:
    h = Harness()
    a = h.stable()
    t = h.join(0, client="v4", require_known=True)
    r0 = h.joins[t]
    assert r0.error_code == Err.MEMBER_ID_REQUIRED and r0.member_id in h.core.groups["g"].pending
    # A rejoin with new metadata prepares a rebalance, which waits for the pending id until it lapses.
    ta = h.join(1, member_id=a.member_id, client="a", protocols=[("range", b"changed")])
    assert ta not in h.joins
    h.tick(SESSION)
    assert h.joins[ta].generation_id == 2 and not h.core.groups["g"].pending


def test_leave_of_the_last_member_empties_the_group() -> None:
    h = Harness()
    r = h.stable()
    out = h.core.leave("g", [(r.member_id, None), ("ghost", None)], 5)
    assert (out.error_code, out.member_errors) == (Err.NONE, [Err.NONE, Err.UNKNOWN_MEMBER_ID])
    h.take(out.effects)
    g = h.core.groups["g"]
    assert g.state == EMPTY and g.generation == 2 and g.leader is None


def test_a_member_leaving_answers_its_parked_join() -> None:
    h = Harness()
    a = h.stable()
    tb = h.join(0, client="b")
    out = h.core.leave("g", [(h.core.groups["g"].leader, None)], 1)
    h.take(out.effects)
    # a's slot is gone; b alone completes generation 2 and leads it.
    assert h.joins[tb].generation_id == 2 and h.joins[tb].leader == h.joins[tb].member_id
    assert h.core.heartbeat("g", 2, a.member_id, None, 2) == Err.UNKNOWN_MEMBER_ID


def test_drop_answers_parked_requests_not_coordinator() -> None:
    h = Harness()
    h.stable()
    tb = h.join(0, client="b")
    h.take(h.core.drop({"g"}))
    assert h.joins[tb].error_code == Err.NOT_COORDINATOR and "g" not in h.core.groups


def test_session_timeout_bounds_and_bad_group_id() -> None:
    h = Harness()
    assert h.joins[h.join(0, session=10)].error_code == Err.INVALID_SESSION_TIMEOUT
    assert h.joins[h.join(0, group="")].error_code == Err.INVALID_GROUP_ID
