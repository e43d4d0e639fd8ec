"""ConsumerGroupHeartbeat answers that never reach the member, and owned partitions that lag behind what the
member holds: the cases librdkafka produces under load.

librdkafka times a heartbeat out after one heartbeat interval; the late answer is dropped and the next
heartbeat is not a full request (only a coordinator error or a broken connection makes it one). It says what
it owns only in the heartbeat that acknowledges an assignment it applied, or in a full request, where it
lists the last assignment acknowledged (not one it is applying). An assignment equal to the one it has or is
applying is ignored.
"""

from __future__ import annotations

import pytest

from epochlog.codes import Err
from epochlog.groups.consumer.model import UNREVOKED_PARTITIONS, Assignment
from tests.unit.groups.consumer.test_coordinator import REBALANCE, Group, tps

pytestmark = pytest.mark.unit


def join(g: Group, member_id: str, **kw: object) -> None:
    """A join whose assignment the member applies and acknowledges."""
    r = g.join(member_id, **kw)
    if r.assignment:
        assert g.hb(member_id, r.member_epoch, r.assignment).error_code == Err.NONE


def full(g: Group, member_id: str, epoch: int, owned: Assignment) -> object:
    return g.hb(member_id, epoch, owned, rebalance_timeout_ms=REBALANCE, subscribed_topic_names=("a",))


def test_a_lost_answer_asking_to_revoke_is_repeated_until_the_member_revokes() -> None:
    """bench/rebalance_bench.py's stall: the smaller assignment went out after a slow write, the member had
    given up waiting, and its next heartbeat (same epoch, nothing owned said) changed nothing, so it was never
    told again and never revoked."""
    g = Group()
    join(g, "m1")
    join(g, "m2")
    lost = g.hb("m1", 1, None)
    assert lost.assignment is not None and len(lost.assignment) == 3
    again = g.hb("m1", 1, None)
    assert again.assignment == lost.assignment
    assert g.hb("m1", 1, lost.assignment).member_epoch == 2  # it revokes once it hears


def test_a_lost_answer_growing_the_assignment_is_repeated_until_acknowledged() -> None:
    g = Group()
    join(g, "m1")
    join(g, "m2")
    kept = g.hb("m1", 1, None).assignment
    assert kept is not None
    g.hb("m1", 1, kept)  # revoked: the rest is free
    lost = g.hb("m2", 2, None)
    assert lost.assignment == tps(*range(6)) - kept
    assert g.hb("m2", 2, None).assignment == lost.assignment  # not heard: said again
    assert g.hb("m2", 2, lost.assignment).assignment is None  # acknowledged: not repeated
    assert g.hb("m2", 2, None).assignment is None


def _second_member_given_its_share(g: Group) -> Assignment:
    join(g, "m1")
    join(g, "m2")
    kept = g.hb("m1", 1, None).assignment
    assert kept is not None
    g.hb("m1", 1, kept)
    given = g.hb("m2", 2, None).assignment
    assert given is not None and len(given) == 3
    return given


def test_a_full_request_listing_the_last_acknowledged_assignment_does_not_release_what_is_being_applied() -> None:
    """The double owner seen under load: m2 was just given three partitions and is applying them (its
    on_assign runs) when a third member joins; a full request from m2 then lists what it had acknowledged
    (nothing), which must not count as having revoked the partitions the new target takes from it."""
    g = Group()
    given = _second_member_given_its_share(g)
    join(g, "m3")
    r = full(g, "m2", 2, frozenset())
    m2 = g.core.group.members["m2"]
    assert m2.state == UNREVOKED_PARTITIONS and m2.owns() == given
    assert r.assignment == given  # still its own to finish applying, then to give up
    for _ in range(3):
        r3 = g.hb("m3", 3, None)
        assert r3.error_code == Err.NONE and not (r3.assignment or frozenset()) & given
    g.hb("m2", 2, given)  # the acknowledgement of what it applied
    revoke = g.hb("m2", 2, None).assignment
    assert revoke is not None and revoke < given  # now told to give some up
    assert g.hb("m2", 2, revoke).member_epoch == 3
    moved = given - revoke
    r3 = g.hb("m3", 3, None)
    assert r3.assignment is not None and moved <= r3.assignment


def test_a_request_from_the_previous_epoch_does_not_release_partitions_given_since() -> None:
    """A heartbeat that arrives late (behind a slow write, on a connection the client gave up) says what the
    member owned before its last answer; the partitions that answer gave it are not revoked by it."""
    g = Group(topics={"a": 2, "x": 0})
    g.join("m1", subscribed_topic_names=("x",))
    assert g.hb("m1", 1, frozenset()).error_code == Err.NONE
    g.write(g.core.topics_changed(g.now, {"a": 2, "x": 2}))
    grown = g.hb("m1", 1, frozenset())
    assert (grown.member_epoch, grown.assignment) == (2, tps(0, 1, topic="x"))
    assert g.hb("m1", 2, grown.assignment).error_code == Err.NONE  # applied and acknowledged
    join(g, "m2", subscribed_topic_names=("x",))
    late = g.hb("m1", 1, frozenset())  # the first one again, processed late
    assert late.error_code == Err.NONE
    assert g.core.group.members["m1"].owns() == tps(0, 1, topic="x")
    r2 = g.hb("m2", 3, None)
    assert not (r2.assignment or frozenset()) & tps(0, 1, topic="x")


def test_the_full_request_right_after_a_join_does_not_release_what_the_join_gave() -> None:
    """The capture (bench/kip848_overlap.py, Kafka's rule): m1's join was answered with all twelve
    partitions; librdkafka, still in its init state, sent its next heartbeat at once as a full request listing
    what it had acknowledged (nothing) and then ran on_assign for all twelve; m2 had joined in between, and
    the six the new target moved to m2 were handed to m2 on the strength of that empty list."""
    g = Group(topics={"a": 12})
    joined = g.join("m1")
    assert joined.assignment == tps(*range(12))
    g.join("m2")
    r1 = full(g, "m1", joined.member_epoch, frozenset())
    assert r1.member_epoch == joined.member_epoch and r1.assignment == tps(*range(12))
    r2 = g.hb("m2", 2, None)
    assert not r2.assignment
    g.hb("m1", 1, tps(*range(12)))  # on_assign ran: acknowledged
    kept = g.hb("m1", 1, None).assignment
    assert kept is not None and len(kept) == 6
    assert g.hb("m1", 1, kept).member_epoch == 2
    assert g.hb("m2", 2, None).assignment == tps(*range(12)) - kept
