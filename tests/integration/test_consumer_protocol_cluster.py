"""KIP-848 consumer groups (``group.protocol=consumer``) of confluent-kafka consumers on a three-broker cluster.

The group's coordinator is the leader of its ``__consumer_offsets`` partition; a kill -9 of that broker moves
the group to the partition's new leader, which rebuilds it from the records. Under a producer's load, with
members joining and leaving around the kill, the members never read a partition at the same time, a record
is read twice only from a range its previous owner read but could not commit, and no acknowledged commit is
lost. Static members (``group.instance.id``) come back to their own partitions without moving anyone else's,
and a regex subscription picks up a topic created after the group formed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.types import GroupId

from epochlog.client.wire import Connection
from epochlog.codes import Err
from epochlog.server.cluster.local import LocalCluster
from tests.integration.cluster_helpers import AckingProducer, create_topic, new_cluster, wait_until
from tests.integration.group_watch import (
    Watched,
    assert_duplicates_only_uncommitted,
    assert_one_owner,
    assert_reads_follow_ownership,
    new_watched,
    owned_by,
    poll_all,
)

GROUP_TIMERS = {
    "group_consumer_heartbeat_interval_ms": "250",
    "group_consumer_session_timeout_ms": "6000",
    "offsets_topic_num_partitions": "6",
}


def member_conf(bootstrap: str, group: str, **extra: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "topic.metadata.refresh.interval.ms": "1000",
        **extra,
    }


def coordinator_of(bootstrap: str, group: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer is in
    return int(admin.describe_consumer_groups([group])[group].result(10).coordinator.id)


def describe(bootstrap: str, group: str) -> Any:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    return admin.describe_consumer_groups([group])[group].result(10)


def raw_describe(lc: LocalCluster, group: str) -> Any:
    """ConsumerGroupDescribe from the group's coordinator, for what the admin client leaves out (the group
    epoch, a member's subscribed regex)."""
    node = lc.broker(coordinator_of(lc.bootstrap, group))
    with Connection(node.host, node.port, 10) as conn:
        r = conn.request(ConsumerGroupDescribeRequest(group_ids=(GroupId(group),), include_authorized_operations=False))
    assert r.groups[0].error_code == Err.NONE, r
    return r.groups[0]


def committed_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    admin = AdminClient({"bootstrap.servers": bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(partitions)])
    got = admin.list_consumer_group_offsets([req])[group].result(10)
    return {(tp.topic, tp.partition): tp.offset for tp in got.topic_partitions}


def max_acked_commits(members: list[Watched], before: float) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    for w in members:
        for t, tp, off in w.commit_log:
            if t <= before:
                out[tp] = max(out.get(tp, -1), off)
    return out


def commit_all(members: list[Watched]) -> None:
    for w in members:
        if not w.closed:
            w.commit()


def test_group_carries_on_through_kill9_of_its_coordinator(tmp_path: Path) -> None:
    lc = new_cluster(tmp_path, 3, replica_lag_time_max_ms="3000", **GROUP_TIMERS).start()
    members: list[Watched] = []
    try:
        run_failover(lc, members)
    finally:
        for w in members:
            try:
                w.close()
            except RuntimeError:
                pass
        lc.stop()


def run_failover(lc: LocalCluster, members: list[Watched]) -> None:
    bs, topic, group = lc.bootstrap, "load", "g-failover"
    create_topic(bs, topic, 6, 3, {"min.insync.replicas": "2"})
    prod = AckingProducer(bs, topic, rate_sleep=0.02).start()
    try:
        conf = member_conf(bs, group)
        # They join one after another under load: every join hands partitions over.
        for name in ("c1", "c2", "c3"):
            members.append(new_watched(name, conf, [topic]))
            poll_all(members, lambda: len(owned_by(members)) == 6 and all(w.owned for w in members), 30, name)
        poll_all(members, lambda: len({tp for w in members for tp in w.last_read}) == 6, 20, "reads of every partition")
        commit_all(members)
        assert any(how == "revoke" for w in members for _t, how, _tp in w.events)  # handovers under load
        before = raw_describe(lc, group)
        before_ids = {m.member_id for m in before.members}

        coordinator = wait_until(lambda: coordinator_of(bs, group) + 1, 20, "a coordinator") - 1
        killed_at = time.monotonic()
        lc.kill9(f"broker-{coordinator}")
        committed_before = max_acked_commits(members, killed_at)
        assert len(committed_before) == 6, committed_before

        # The members go on reading and committing while the group moves to another broker.
        def moved() -> bool:
            try:
                return coordinator_of(bs, group) not in (coordinator, -1)
            except Exception:
                return False

        deadline = time.monotonic() + 30
        while not moved():
            assert time.monotonic() < deadline, "no new coordinator"
            for w in members:
                w.poll(0.05)
            assert_one_owner(members)
            commit_all(members)
        # The same group and members, rebuilt from the records, not a group its members joined afresh.
        after = raw_describe(lc, group)
        assert {m.member_id for m in after.members} == before_ids
        assert after.group_epoch >= before.group_epoch
        n_acked = len(prod.acked)
        poll_all(
            members,
            lambda: len(prod.acked) > n_acked + 200 and commit_ok(members),
            40,
            "commits and reads under the new coordinator",
        )
        now_committed = committed_offsets(bs, group, topic, 6)
        for tp, off in committed_before.items():
            assert now_committed[tp] >= off, f"{tp}: committed {off} before the kill, {now_committed[tp]} after"

        # A member leaves under the new coordinator: its partitions go to the other two, from its commits.
        leaving = members[2]
        leaving.close()
        live = members[:2]
        poll_all(members, lambda: len(owned_by(live)) == 6, 30, "c3's partitions taken over")
        n_acked = len(prod.acked)
        poll_all(members, lambda: len(prod.acked) > n_acked + 200, 30, "more records")
    finally:
        prod.stop()
    assert prod.errors == []

    # Everything acknowledged is read, by members that owned the partition at the time.
    want = {(topic, p, o) for p, o in prod.acked.values()}

    def read_all() -> bool:
        got = {(tp[0], tp[1], off) for w in members for _t, tp, off, _v in w.reads}
        return want <= got

    poll_all(members, read_all, 30, "every acknowledged record read")
    commit_all(members)
    assert_one_owner(members)
    assert_reads_follow_ownership(members)
    dups = assert_duplicates_only_uncommitted(members)
    final = committed_offsets(bs, group, topic, 6)
    for tp, off in committed_before.items():
        assert final[tp] >= off
    print(f"records {len(want)}, duplicates {dups}, commit errors {[len(w.commit_errors) for w in members]}")


def commit_ok(members: list[Watched]) -> bool:
    return all(w.commit() for w in members if not w.closed)


@pytest.fixture(scope="module")
def quiet_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A cluster no test hurts, shared by the tests that only need the group to behave."""
    lc = new_cluster(tmp_path_factory.mktemp("kip848"), 3, **GROUP_TIMERS).start()
    yield lc
    lc.stop()


def test_static_member_restarted_in_its_session_gets_its_partitions_back(quiet_cluster: LocalCluster) -> None:
    bs, topic, group = quiet_cluster.bootstrap, "static", "g-static"
    create_topic(bs, topic, 6, 3, {})
    members: list[Watched] = []
    try:
        # One member at a time, each joining a settled group: what this test is about is the restart below.
        # (A member joining while another is still taking partitions it was just given is the kill -9 test's
        # ground; under heavy load one CI run saw a partition held by two members in that window: see the
        # notes in docs/protocol.md, "KIP-848".)
        for name in ("s1", "s2", "s3"):
            members.append(new_watched(name, member_conf(bs, group, **{"group.instance.id": name}), [topic]))
            share = 6 // len(members)
            poll_all(members, lambda share=share: all(len(w.owned) == share for w in members), 30, "an even split")
        s1, s2, s3 = members
        mine = set(s2.owned)
        before = describe(bs, group)
        epoch_events = {w.name: len(w.events) for w in (s1, s3)}
        s2.close()  # a static member leaves with epoch -2: its slot and partitions wait for it
        after_close = describe(bs, group)
        assert {m.member_id for m in after_close.members} == {m.member_id for m in before.members}
        back = new_watched("s2", member_conf(bs, group, **{"group.instance.id": "s2"}), [topic])
        members[1] = back
        poll_all(members, lambda: back.owned == mine, 20, "s2's partitions back")
        # Nobody else moved: no callback fired on s1 or s3, and the broker's view matches.
        t_end = time.monotonic() + 1.0
        poll_all(members, lambda: time.monotonic() > t_end, 5, "a quiet second")
        assert {w.name: len(w.events) for w in (s1, s3)} == epoch_events
        d = describe(bs, group)
        assigned = {m.group_instance_id: {tp.partition for tp in m.assignment.topic_partitions} for m in d.members}
        assert assigned == {w.name: {p for _t, p in w.owned} for w in members}
    finally:
        for w in members:
            w.close()


def test_regex_subscription_picks_up_a_new_topic(quiet_cluster: LocalCluster) -> None:
    bs, group = quiet_cluster.bootstrap, "g-regex"
    create_topic(bs, "regex-topic-a", 2, 3, {})
    create_topic(bs, "other-topic", 2, 3, {})
    members = [new_watched(n, member_conf(bs, group), ["^regex-topic-.*"]) for n in ("r1", "r2")]
    try:
        a = {("regex-topic-a", 0), ("regex-topic-a", 1)}
        poll_all(members, lambda: set(owned_by(members)) == a, 30, "regex-topic-a assigned")
        create_topic(bs, "regex-topic-b", 2, 3, {})
        b = {("regex-topic-b", 0), ("regex-topic-b", 1)}
        poll_all(
            members,
            lambda: set(owned_by(members)) == a | b and all(len(w.owned) == 2 for w in members),
            30,
            "regex-topic-b assigned, 2/2",
        )
        # librdkafka sends the pattern to the broker (wrapped in a group, as it joins several with |) and
        # leaves the matching to the coordinator: the members subscribe to no names of their own.
        d = raw_describe(quiet_cluster, group)
        assert [(m.subscribed_topic_names, m.subscribed_topic_regex) for m in d.members] == [
            ((), "(^regex-topic-.*)")
        ] * 2
    finally:
        for w in members:
            w.close()
