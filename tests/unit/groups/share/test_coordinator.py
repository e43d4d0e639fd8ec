"""ShareGroupHeartbeat on the share-group core: joins, the simple assignor sharing partitions, epochs and
Kafka's error codes, leaving and session timeouts (MemberGone), describe, and replay of the group records."""

from __future__ import annotations

import itertools

import pytest

from epochlog.codes import Err
from epochlog.groups.share.assignor import simple_assign
from epochlog.groups.share.coordinator import ShareGroupCoordinator
from epochlog.groups.share.group_records import GroupRecord
from epochlog.groups.share.messages import GroupEffect, MemberGone, ShareHeartbeatRequest
from epochlog.groups.share.model import ShareGroupConfig

pytestmark = pytest.mark.unit


def coord(**kw: int) -> ShareGroupCoordinator:
    ids = (f"m{i}" for i in itertools.count())
    return ShareGroupCoordinator("g", ShareGroupConfig(**kw), {"t": 4, "u": 1}, lambda: next(ids))


def hb(member: str, epoch: int, topics: tuple[str, ...] | None = None) -> ShareHeartbeatRequest:
    return ShareHeartbeatRequest("g", member, epoch, subscribed_topic_names=topics)


def records(effects: list[GroupEffect]) -> list[GroupRecord]:
    return [e for e in effects if not isinstance(e, MemberGone) and type(e).__name__.startswith("ShareGroup")]


def test_simple_assignor_covers_every_partition_and_may_share() -> None:
    a = simple_assign({"x": frozenset({"t"}), "y": frozenset({"t"})}, {"t": 4})
    assert a == {"x": frozenset({("t", 0), ("t", 2)}), "y": frozenset({("t", 1), ("t", 3)})}
    many = simple_assign({f"m{i}": frozenset({"u"}) for i in range(3)}, {"u": 1})
    assert all(tps == frozenset({("u", 0)}) for tps in many.values())  # one partition, three members
    assert simple_assign({"x": frozenset({"nope"})}, {"t": 4}) == {"x": frozenset()}


def test_join_gets_an_assignment_and_epochs() -> None:
    c = coord()
    r1, _ = c.heartbeat(0, hb("", 0, ("t", "u")))
    assert r1.error_code == Err.NONE and r1.member_id == "m0" and r1.member_epoch == 1
    assert r1.assignment == frozenset({("t", 0), ("t", 1), ("t", 2), ("t", 3), ("u", 0)})
    r2, _ = c.heartbeat(1, hb("", 0, ("t", "u")))
    assert r2.member_epoch == 2
    # The first member learns its smaller share on its next heartbeat; u-0 is shared by both.
    r3, _ = c.heartbeat(2, hb("m0", 1))
    assert r3.member_epoch == 2 and r3.assignment == frozenset({("t", 0), ("t", 2), ("u", 0)})
    assert r2.assignment is not None and ("u", 0) in r2.assignment
    r4, _ = c.heartbeat(3, hb("m0", 2))
    assert r4.assignment is None  # unchanged
    d = c.describe()
    assert (d.state, d.group_epoch, d.assignor, len(d.members)) == ("Stable", 2, "simple", 2)


def test_errors() -> None:
    c = coord(max_size=1)
    assert c.heartbeat(0, hb("", 0))[0].error_code == Err.INVALID_REQUEST  # no subscription on join
    assert c.heartbeat(0, hb("", 3))[0].error_code == Err.INVALID_REQUEST  # no member id
    assert c.heartbeat(0, hb("x", -2))[0].error_code == Err.INVALID_REQUEST
    assert c.heartbeat(0, ShareHeartbeatRequest("", "", 0, subscribed_topic_names=("t",)))[0].error_code == (
        Err.INVALID_REQUEST
    )
    assert c.heartbeat(0, hb("ghost", 4))[0].error_code == Err.UNKNOWN_MEMBER_ID
    assert c.heartbeat(0, hb("ghost", -1))[0].error_code == Err.UNKNOWN_MEMBER_ID
    c.heartbeat(0, hb("", 0, ("t",)))
    assert c.heartbeat(0, hb("", 0, ("t",)))[0].error_code == Err.GROUP_MAX_SIZE_REACHED
    assert c.heartbeat(0, hb("m0", 7))[0].error_code == Err.FENCED_MEMBER_EPOCH
    c.topics_changed({"t": 5, "u": 1})
    assert c.heartbeat(0, hb("m0", 1))[0].member_epoch == 2
    assert c.heartbeat(0, hb("m0", 1))[0].error_code == Err.NONE  # the previous epoch: the answer was lost
    c.topics_changed({"t": 6, "u": 1})
    c.heartbeat(0, hb("m0", 2))
    assert c.heartbeat(0, hb("m0", 1))[0].error_code == Err.FENCED_MEMBER_EPOCH


def test_leave_and_session_timeout_release_the_member() -> None:
    c = coord(session_timeout_ms=100)
    c.heartbeat(0, hb("", 0, ("t",)))
    c.heartbeat(50, hb("", 0, ("t",)))
    r, eff = c.heartbeat(60, hb("m1", -1))
    assert r.member_epoch == -1 and MemberGone("g", "m1") in eff
    assert c.tick(99) and "m0" in c.group.members
    eff = c.tick(100)
    assert MemberGone("g", "m0") in eff and not c.group.members
    assert c.describe().state == "Empty"


def test_replay_rebuilds_the_group() -> None:
    c = coord()
    log: list[GroupRecord] = []
    for now, req in enumerate([hb("", 0, ("t", "u")), hb("", 0, ("t",)), hb("m0", 1), hb("m1", -1), hb("", 0, ("u",))]):
        log += records(c.heartbeat(now, req)[1])
    again = ShareGroupCoordinator.from_records("g", log, 10, topics={"t": 4, "u": 1})
    for field in ("group_epoch", "assignment_epoch", "target", "subscription_metadata"):
        assert getattr(again.group, field) == getattr(c.group, field)
    assert {m: (x.member_epoch, x.assigned) for m, x in again.group.members.items()} == {
        m: (x.member_epoch, x.assigned) for m, x in c.group.members.items()
    }
