"""ConsumerGroupHeartbeat on the consumer-group core: joins, handovers, Kafka's error codes, static members,
timeouts, offset commits by epoch, regex subscriptions, and replay."""

from __future__ import annotations

from dataclasses import replace

import pytest

from epochlog.codes import Err
from epochlog.groups.consumer.coordinator import ConsumerGroupCoordinator, validate_offset_commit
from epochlog.groups.consumer.messages import Effect, HeartbeatRequest, HeartbeatResponse, WakeAt
from epochlog.groups.consumer.model import (
    GROUP_ASSIGNING,
    GROUP_EMPTY,
    GROUP_RECONCILING,
    GROUP_STABLE,
    NO_PARTITIONS,
    UNREVOKED_PARTITIONS,
    Assignment,
    ConsumerGroup,
    ConsumerGroupConfig,
)
from epochlog.groups.consumer.records import RECORD_TYPES, ConsumerGroupMetadata, Record

pytestmark = pytest.mark.unit

SESSION = 45_000
REBALANCE = 30_000


class Group:
    """A coordinator, the records it wrote, and a clock."""

    def __init__(self, topics: dict[str, int] | None = None, **config: object) -> None:
        self.core = ConsumerGroupCoordinator("g", ConsumerGroupConfig(**config), topics or {"a": 6})  # type: ignore[arg-type]
        self.log: list[Record] = []
        self.now = 0

    def write(self, effects: list[Effect]) -> list[Effect]:
        self.log.extend(e for e in effects if isinstance(e, RECORD_TYPES))
        return effects

    def hb(
        self, member_id: str, epoch: int, owned: Assignment | None = NO_PARTITIONS, **kw: object
    ) -> HeartbeatResponse:
        if epoch == 0:
            kw.setdefault("rebalance_timeout_ms", REBALANCE)
            kw.setdefault("subscribed_topic_names", ("a",))
        req = HeartbeatRequest("g", member_id, epoch, owned=owned, **kw)  # type: ignore[arg-type]
        resp, effects = self.core.heartbeat(self.now, req)
        self.write(effects)
        return resp

    def join(self, member_id: str, **kw: object) -> HeartbeatResponse:
        r = self.hb(member_id, 0, **kw)
        assert r.error_code == Err.NONE, r
        return r


def tps(*ps: int, topic: str = "a") -> Assignment:
    return frozenset((topic, p) for p in ps)


def test_a_lone_member_gets_everything_with_the_heartbeat_interval() -> None:
    g = Group(heartbeat_interval_ms=3000)
    r = g.join("m1")
    assert (r.member_id, r.member_epoch, r.heartbeat_interval_ms, r.assignment) == ("m1", 1, 3000, tps(*range(6)))
    assert g.core.group.state == GROUP_STABLE
    again = g.hb("m1", 1, tps(*range(6)))
    assert again.error_code == Err.NONE and again.assignment is None  # nothing changed, nothing resent


def test_an_empty_member_id_gets_one() -> None:
    g = Group()
    g.core.new_member_id = lambda client_id: f"{client_id}-x"
    assert g.join("", client_id="app").member_id == "app-x"


def test_a_partition_moves_only_after_its_owner_revoked_it() -> None:
    g = Group()
    g.join("m1")
    r2 = g.join("m2")
    assert r2.member_epoch == 2 and r2.assignment == NO_PARTITIONS  # all of a is still m1's
    assert g.core.group.state == GROUP_RECONCILING
    r1 = g.hb("m1", 1, tps(*range(6)))
    kept = r1.assignment
    assert r1.member_epoch == 1 and kept is not None and len(kept) == 3  # told to give up the rest
    assert g.core.group.members["m1"].state == UNREVOKED_PARTITIONS
    assert g.hb("m2", 2).assignment is None  # still nothing: m1 has not let go
    r1 = g.hb("m1", 1, kept)  # revoked
    assert r1.member_epoch == 2
    r2 = g.hb("m2", 2)
    assert r2.assignment == tps(*range(6)) - kept
    assert g.hb("m1", 2, kept).error_code == Err.NONE
    assert g.core.group.state == GROUP_STABLE


def test_stale_ahead_and_unknown_epochs() -> None:
    g = Group()
    g.join("m1")
    g.join("m2")
    g.hb("m1", 1, tps(*range(6)))
    assert g.hb("m1", 7, tps(0)).error_code == Err.FENCED_MEMBER_EPOCH
    assert g.hb("m2", 1).error_code == Err.FENCED_MEMBER_EPOCH  # m2 is at 2; 1 is not its previous epoch
    assert g.hb("nobody", 3).error_code == Err.UNKNOWN_MEMBER_ID
    assert g.hb("nobody", -1, None).error_code == Err.UNKNOWN_MEMBER_ID


def test_a_member_one_answer_behind_is_accepted_and_told_again() -> None:
    g = Group(topics={"a": 2})
    g.join("m1")
    g.join("m2")
    g.hb("m1", 1, tps(0, 1))
    kept = g.core.group.members["m1"].assigned
    assert len(kept) == 1
    assert g.hb("m1", 1, kept).member_epoch == 2  # revoked the other; pretend this answer was lost
    r = g.hb("m1", 1, kept)
    assert (r.error_code, r.member_epoch, r.assignment) == (Err.NONE, 2, kept)
    # At the previous epoch but owning more than it may: fenced.
    assert g.hb("m1", 1, tps(0, 1)).error_code == Err.FENCED_MEMBER_EPOCH


def test_a_fenced_member_rejoining_with_its_id_starts_afresh_and_releases_its_partitions() -> None:
    g = Group(topics={"a": 2})
    g.join("m1")
    g.join("m2")
    g.hb("m1", 1, tps(0, 1))
    assert g.core.group.partition_owner.get(("a", 1)) == ("m1", 1)
    r = g.join("m1")  # e.g. after FENCED_MEMBER_EPOCH: it gave up everything
    assert r.member_epoch == g.core.group.group_epoch and g.core.group.members["m1"].pending_revocation == NO_PARTITIONS
    assert g.hb("m2", 2).assignment is not None  # m2's half is free now
    assert not g.core.group.members["m1"].assigned & g.core.group.members["m2"].assigned


@pytest.mark.parametrize(
    ("req", "code"),
    [
        (HeartbeatRequest("", "m", 1), Err.INVALID_REQUEST),
        (HeartbeatRequest("g", "", 1), Err.INVALID_REQUEST),
        (HeartbeatRequest("g", "m", 0, owned=NO_PARTITIONS, subscribed_topic_names=("a",)), Err.INVALID_REQUEST),
        (HeartbeatRequest("g", "m", 0, rebalance_timeout_ms=1, subscribed_topic_names=("a",)), Err.INVALID_REQUEST),
        (HeartbeatRequest("g", "m", 0, rebalance_timeout_ms=1, owned=tps(0), subscribed_topic_names=("a",)), 42),
        (HeartbeatRequest("g", "m", 0, rebalance_timeout_ms=1, owned=NO_PARTITIONS), Err.INVALID_REQUEST),
        (HeartbeatRequest("g", "m", -2), Err.INVALID_REQUEST),
        (HeartbeatRequest("g", "m", -3), Err.INVALID_REQUEST),
        (HeartbeatRequest("g", "m", 1, instance_id=""), Err.INVALID_REQUEST),
        (HeartbeatRequest("g", "m", 1, server_assignor="sticky"), Err.UNSUPPORTED_ASSIGNOR),
        (HeartbeatRequest("g", "m", 1, subscribed_topic_regex="(a"), Err.INVALID_REGULAR_EXPRESSION),
        (HeartbeatRequest("g", "m", 1, subscribed_topic_regex="(a)\\1"), Err.INVALID_REGULAR_EXPRESSION),
        (HeartbeatRequest("other", "m", 1), Err.NOT_COORDINATOR),
    ],
)
def test_invalid_requests_are_refused_and_change_nothing(req: HeartbeatRequest, code: int) -> None:
    g = Group()
    resp, effects = g.core.heartbeat(0, req)
    assert (resp.error_code, effects) == (code, [])
    assert g.core.group == ConsumerGroup("g")


def test_group_max_size() -> None:
    g = Group(max_size=1)
    g.join("m1")
    assert g.hb("m2", 0).error_code == Err.GROUP_MAX_SIZE_REACHED
    assert g.hb("m1", 1, tps(*range(6))).error_code == Err.NONE


def test_server_assignor_is_the_one_most_members_ask_for() -> None:
    g = Group(topics={"a": 4, "b": 4})
    assert g.core.assignor() == "uniform"
    g.join("m1", subscribed_topic_names=("a", "b"), server_assignor="range")
    g.join("m2", subscribed_topic_names=("a", "b"), server_assignor="range")
    assert g.core.describe().assignor == "range"
    t = g.core.group.target
    assert t["m1"] == tps(0, 1) | tps(0, 1, topic="b") and t["m2"] == tps(2, 3) | tps(2, 3, topic="b")


def test_static_member_leaves_for_now_and_its_successor_takes_its_slot_without_a_rebalance() -> None:
    g = Group()
    g.join("s1", instance_id="i1")
    g.join("m2")
    g.hb("s1", 1, tps(*range(6)))
    kept = g.core.group.members["s1"].assigned
    g.hb("s1", 1, kept)
    r = g.hb("s1", -2, None, instance_id="i1")
    assert (r.error_code, r.member_epoch) == (Err.NONE, -2)
    epoch = g.core.group.group_epoch
    # Its partitions stay its own while it is away.
    assert g.hb("m2", 2).assignment == tps(*range(6)) - kept
    assert all(g.core.group.partition_owner[tp][0] == "s1" for tp in kept)
    r = g.join("s1-new", instance_id="i1")
    assert (r.member_epoch, r.assignment) == (epoch, kept)
    assert g.core.group.group_epoch == epoch  # no rebalance
    assert "s1" not in g.core.group.members and g.core.group.static_members == {"i1": "s1-new"}
    assert g.hb("s1", 2, kept, instance_id="i1").error_code == Err.FENCED_INSTANCE_ID


def test_a_static_instance_still_in_use_cannot_join_twice() -> None:
    g = Group()
    g.join("s1", instance_id="i1")
    assert g.hb("s2", 0, instance_id="i1").error_code == Err.UNRELEASED_INSTANCE_ID
    assert g.hb("s2", 1, instance_id="i1").error_code == Err.FENCED_INSTANCE_ID
    assert g.hb("s2", 1, instance_id="i9").error_code == Err.UNKNOWN_MEMBER_ID
    assert g.hb("s2", -1, None, instance_id="i1").error_code == Err.FENCED_INSTANCE_ID
    assert g.hb("s1", 0, instance_id="i1").member_epoch == 1  # its own retry (the answer was lost)


def test_a_static_member_leaving_for_good_frees_its_slot() -> None:
    g = Group()
    g.join("s1", instance_id="i1")
    assert g.hb("s1", -1, None, instance_id="i1").member_epoch == -1
    assert g.core.group.state == GROUP_EMPTY and g.core.group.static_members == {}
    assert g.join("s2", instance_id="i1").assignment == tps(*range(6))


def test_session_timeout_fences_and_releases() -> None:
    g = Group()
    g.join("m1")
    g.join("m2")
    g.now = 40_000
    g.hb("m1", 1, tps(*range(6)))
    kept = g.core.group.members["m1"].assigned
    g.hb("m1", 1, kept)
    deadlines = [e.at_ms for e in g.write(g.core.tick(g.now)) if isinstance(e, WakeAt)]
    assert deadlines == [SESSION]  # m2's session, from its join at 0
    g.now = SESSION
    g.write(g.core.tick(g.now))
    assert set(g.core.group.members) == {"m1"}
    r = g.hb("m1", 2, kept)
    assert r.assignment == tps(*range(6))
    assert g.hb("m2", 2).error_code == Err.UNKNOWN_MEMBER_ID


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced() -> None:
    g = Group()
    g.join("m1", rebalance_timeout_ms=5000)
    g.now = 1000
    g.join("m2")
    g.hb("m1", 1, tps(*range(6)))
    assert g.core.next_deadline() == 6000
    for g.now in (3000, 5999):
        g.hb("m1", 1, tps(*range(6)))  # heartbeats, but holds on
        g.hb("m2", 2)
        g.write(g.core.tick(g.now))
    assert "m1" in g.core.group.members
    g.now = 6000
    g.write(g.core.tick(g.now))
    assert set(g.core.group.members) == {"m2"}
    assert g.hb("m2", 2).assignment == tps(*range(6))


def test_offset_commits_are_fenced_by_member_epoch() -> None:
    g = Group()
    grp = g.core.group
    assert validate_offset_commit(grp, "", -1) == Err.NONE  # an empty group: admin tools may commit
    g.join("m1")
    assert validate_offset_commit(grp, "", -1) == Err.UNKNOWN_MEMBER_ID
    assert validate_offset_commit(grp, "m1", 1) == Err.NONE
    g.join("m2")
    g.hb("m1", 1, tps(*range(6)))
    g.hb("m1", 1, grp.members["m1"].assigned)  # revoked: epoch 2
    assert validate_offset_commit(grp, "m1", 1) == Err.STALE_MEMBER_EPOCH
    assert validate_offset_commit(grp, "m1", 3) == Err.STALE_MEMBER_EPOCH
    assert validate_offset_commit(grp, "gone", 2) == Err.UNKNOWN_MEMBER_ID
    err, effects = g.core.commit_offsets(g.now, "m1", 2, {("a", 0): 42})
    assert err == Err.NONE and g.write(effects) and grp.offsets == {("a", 0): 42}
    assert g.core.commit_offsets(g.now, "m1", 1, {("a", 0): 7}) == (Err.STALE_MEMBER_EPOCH, [])
    assert grp.offsets == {("a", 0): 42}


def test_regex_subscriptions_follow_new_topics_and_skip_internal_ones() -> None:
    g = Group(topics={"orders-eu": 2, "payments": 2, "__consumer_offsets": 50})
    r = g.join("m1", subscribed_topic_names=(), subscribed_topic_regex="orders-.*")
    assert r.assignment == tps(0, 1, topic="orders-eu")
    epoch = g.core.group.group_epoch
    g.write(g.core.topics_changed(g.now, {**g.core.topics, "orders-us": 1, "xorders-x": 1}))
    assert g.core.group.group_epoch == epoch + 1 and g.core.group.state == GROUP_ASSIGNING
    r = g.hb("m1", epoch, tps(0, 1, topic="orders-eu"))
    assert r.assignment == tps(0, 1, topic="orders-eu") | tps(0, topic="orders-us")
    g.write(g.core.topics_changed(g.now, {**g.core.topics, "payments": 5}))
    assert g.core.group.group_epoch == epoch + 1  # a topic nobody subscribes to: no new epoch


def test_a_regex_member_sending_a_full_request_is_told_its_assignment_again() -> None:
    g = Group(topics={"orders-eu": 2})
    r = g.join("m1", subscribed_topic_names=None, subscribed_topic_regex="orders-.*")
    epoch = r.member_epoch
    assert g.hb("m1", epoch, tps(0, 1, topic="orders-eu")).assignment is None  # nothing changed: not repeated
    full = g.hb("m1", epoch, tps(0, 1, topic="orders-eu"), rebalance_timeout_ms=REBALANCE,
                subscribed_topic_regex="orders-.*")  # fmt: skip
    assert full.assignment == tps(0, 1, topic="orders-eu")


def test_partitions_added_to_a_subscribed_topic_bump_the_epoch() -> None:
    g = Group(topics={"a": 2})
    g.join("m1")
    g.write(g.core.topics_changed(g.now, {"a": 3}))
    assert g.hb("m1", 1, tps(0, 1)).assignment == tps(0, 1, 2)


def snapshot(c: ConsumerGroupCoordinator) -> object:
    g = c.group
    # What a member has not yet said it owns is not in the records either.
    members = {
        mid: replace(m, session_deadline_ms=0, revocation_deadline_ms=None, unconfirmed=NO_PARTITIONS)
        for mid, m in g.members.items()
    }
    return replace(g, members=members), g.state


def test_replay_rebuilds_the_group_at_every_point() -> None:
    g = Group(topics={"a": 4, "b": 2})
    steps = [
        lambda: g.join("m1", subscribed_topic_names=("a", "b")),
        lambda: g.join("s2", instance_id="i2", rack_id="r1"),
        lambda: g.hb("m1", 1, tps(0, 1, 2, 3) | tps(0, 1, topic="b")),
        lambda: g.core.commit_offsets(g.now, "m1", 1, {("b", 0): 5}),
        lambda: g.hb("m1", 1, g.core.group.members["m1"].assigned),
        lambda: g.hb("s2", 2),
        lambda: g.hb("s2", -2, None, instance_id="i2"),
        lambda: g.join("s3", instance_id="i2"),
        lambda: g.hb("m1", -1, None),
    ]
    for step in steps:
        out = step()
        if isinstance(out, tuple):
            g.write(out[1])
        taken_over = ConsumerGroupCoordinator.from_records("g", g.log, g.now, g.core.config, g.core.topics)
        assert snapshot(taken_over) == snapshot(g.core)
    assert g.core.group.offsets == {("b", 0): 5}
    assert [r.epoch for r in g.log if isinstance(r, ConsumerGroupMetadata)] == [1, 2, 3]
