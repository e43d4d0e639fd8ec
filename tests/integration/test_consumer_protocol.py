"""KIP-848 consumer groups (``group.protocol=consumer``) against a real broker: confluent-kafka consumers
split a topic's partitions by the broker's assignment, read every record once between them, rebalance as
members come and go, resume from committed offsets, and the group survives a kill -9 of its coordinator;
ConsumerGroupDescribe and ListGroups show it as a consumer group. Raw requests check Kafka's answers to a
stale member epoch, an unknown assignor, a classic group's id and a stale OffsetCommit."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, ConsumerGroupType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.consumer_group_describe.v1.request import ConsumerGroupDescribeRequest
from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest
from kio.schema.consumer_group_heartbeat.v1.request import TopicPartitions as HeartbeatTopic
from kio.schema.offset_commit.v9.request import OffsetCommitRequest, OffsetCommitRequestPartition
from kio.schema.offset_commit.v9.request import OffsetCommitRequestTopic as CommitTopic
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from epochlog.client.wire import Connection
from epochlog.codes import Err
from tests.broker_process import BrokerProcess

TOPIC = "kip848"
FAST = {"group.consumer.heartbeat.interval.ms": "300", "group.consumer.session.timeout.ms": "6000"}


def consumer(bootstrap: str, name: str, group: str = "g848", protocol: str = "consumer") -> Consumer:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([TOPIC])
    return c


def owned(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def poll_until(consumers: list[Consumer], done: Callable[[], bool], timeout: float, seen: dict[Any, Any]) -> None:
    """Poll every consumer until ``done()``; each record read goes into ``seen`` by (partition, offset),
    and a record read twice fails at once."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        for c in consumers:
            m = c.poll(0.05)
            if m is None or m.error():
                continue
            key = (m.partition(), m.offset())
            assert key not in seen, f"{key} read twice: by {seen[key]} and {c}"
            assert m.partition() in owned(c), f"{c} read partition {m.partition()} it does not own"
            seen[key] = c


def split(consumers: list[Consumer], sizes: list[int]) -> Callable[[], bool]:
    """Every partition owned by exactly one consumer, in the given numbers."""

    def check() -> bool:
        sets = [owned(c) for c in consumers]
        union = set().union(*sets)
        return union == {0, 1, 2, 3} and sum(map(len, sets)) == 4 and sorted(map(len, sets)) == sorted(sizes)

    return check


def produce(bootstrap: str, n: int, start: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(start, start + n):
        p.produce(TOPIC, value=str(i).encode(), partition=i % 4)
    assert p.flush(10) == 0


def commit(c: Consumer) -> None:
    c.commit(asynchronous=False)


def test_consumers_share_a_topic_by_the_brokers_assignment(broker_factory: Any) -> None:
    b: BrokerProcess = broker_factory(FAST)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 4, 1)])[TOPIC].result(15)
    seen: dict[Any, Any] = {}
    c1, c2 = consumer(b.bootstrap, "c1"), consumer(b.bootstrap, "c2")
    try:
        # Two members: two partitions each, never one partition held by both.
        poll_until([c1, c2], split([c1, c2], [2, 2]), 20, seen)
        produce(b.bootstrap, 200, 0)
        poll_until([c1, c2], lambda: len(seen) == 200, 20, seen)
        assert {p for p, _ in seen if seen[(p, _)] is c1} == owned(c1)
        commit(c1)
        commit(c2)

        # A third joins: the partitions spread 2/1/1, and nothing committed is read again.
        c3 = consumer(b.bootstrap, "c3")
        poll_until([c1, c2, c3], split([c1, c2, c3], [2, 1, 1]), 20, seen)
        produce(b.bootstrap, 100, 200)
        poll_until([c1, c2, c3], lambda: len(seen) == 300, 20, seen)
        for c in (c1, c2, c3):
            commit(c)

        d = admin.describe_consumer_groups(["g848"])["g848"].result(10)
        assert d.type == ConsumerGroupType.CONSUMER
        assert sorted(len(m.assignment.topic_partitions) for m in d.members) == [1, 1, 2]
        listed = admin.list_consumer_groups().result(10)
        assert [(g.group_id, g.type) for g in listed.valid] == [("g848", ConsumerGroupType.CONSUMER)]

        # One leaves: the other two take its partitions and go on from its committed offsets.
        c1.close()
        poll_until([c2, c3], split([c2, c3], [2, 2]), 20, seen)
        produce(b.bootstrap, 100, 300)
        poll_until([c2, c3], lambda: len(seen) == 400, 20, seen)
        assert sorted(int(p) for p, _o in seen) == sorted(i % 4 for i in range(400))
        for c in (c2, c3):
            commit(c)

        # The coordinator dies: the group comes back from its records, with its committed offsets.
        before = admin.describe_consumer_groups(["g848"])["g848"].result(10)
        epoch_before = group_epoch(b)
        assert epoch_before >= 4  # three joins and a leave
        b.kill9()
        b.start()
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        produce(b.bootstrap, 40, 400)
        poll_until([c2, c3], lambda: len(seen) == 440, 30, seen)
        after = admin.describe_consumer_groups(["g848"])["g848"].result(10)
        assert {m.member_id for m in after.members} == {m.member_id for m in before.members}
        # The same group, not a new one its members joined afresh (which would start at epoch 1).
        assert group_epoch(b) >= epoch_before
        committed = c2.committed([TopicPartition(TOPIC, p) for p in range(4)], timeout=10)
        assert [tp.offset for tp in committed] == [100] * 4, committed
        c2.close()
        c3.close()
    finally:
        for c in (c1, c2):
            try:
                c.close()
            except RuntimeError:
                pass  # closed already


def group_epoch(b: BrokerProcess, group: str = "g848") -> int:
    host, port = b.bootstrap.split(":")
    with Connection(host, int(port), 10) as conn:
        r = conn.request(ConsumerGroupDescribeRequest(group_ids=(GroupId(group),), include_authorized_operations=False))
    assert r.groups[0].error_code == Err.NONE and r.groups[0].group_state in ("Stable", "Reconciling", "Assigning")
    return int(r.groups[0].group_epoch)


def heartbeat(conn: Connection, group: str, member: str, epoch: int, **fields: Any) -> Any:
    base: dict[str, Any] = {
        "group_id": GroupId(group),
        "member_id": member,
        "member_epoch": i32(epoch),
        "topic_partitions": None,
    }
    if epoch == 0:
        timeout = i32Timedelta.parse(datetime.timedelta(seconds=30))
        base |= {"rebalance_timeout": timeout, "subscribed_topic_names": (TopicName(TOPIC),)}
        base["topic_partitions"] = ()
    return conn.request(ConsumerGroupHeartbeatRequest(**(base | fields)))


def test_kafkas_answers_to_bad_heartbeats_and_commits(broker_factory: Any) -> None:
    b: BrokerProcess = broker_factory(FAST)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 4, 1)])[TOPIC].result(15)
    classic = consumer(b.bootstrap, "classic", group="classic", protocol="classic")
    try:
        deadline = time.monotonic() + 20
        while not owned(classic):  # the classic group has a member
            assert time.monotonic() < deadline
            classic.poll(0.1)
        host, port = b.bootstrap.split(":")
        with Connection(host, int(port), 10) as conn:
            r = heartbeat(conn, "raw", "m-1", 0)  # coordinator: a single broker coordinates every group
            assert r.error_code == Err.NONE and r.member_epoch >= 1, r
            epoch = int(r.member_epoch)
            topic_id = r.assignment.topic_partitions[0].topic_id
            assert sorted(r.assignment.topic_partitions[0].partitions) == [0, 1, 2, 3]
            r = heartbeat(conn, "raw", "m-1", epoch + 5)
            assert r.error_code == Err.FENCED_MEMBER_EPOCH  # an epoch the member never had
            # A second member: m-1 gives up two partitions, and moves to the next epoch once it has.
            assert heartbeat(conn, "raw", "m-2", 0).error_code == Err.NONE
            everything = (HeartbeatTopic(topic_id=topic_id, partitions=(i32(0), i32(1), i32(2), i32(3))),)
            r = heartbeat(conn, "raw", "m-1", epoch, topic_partitions=everything)
            assert r.error_code == Err.NONE and r.member_epoch == epoch
            kept = r.assignment.topic_partitions[0].partitions
            assert len(kept) == 2
            r = heartbeat(
                conn, "raw", "m-1", epoch, topic_partitions=(HeartbeatTopic(topic_id=topic_id, partitions=kept),)
            )
            assert r.error_code == Err.NONE and r.member_epoch > epoch
            r = heartbeat(conn, "raw", "m-1", epoch)  # the old epoch, and not a lost answer: a zombie
            assert r.error_code == Err.FENCED_MEMBER_EPOCH
            r = heartbeat(conn, "raw", "m-2", 0, server_assignor="sticky")
            assert r.error_code == Err.UNSUPPORTED_ASSIGNOR
            r = heartbeat(conn, "classic", "m-3", 0)
            assert r.error_code == Err.GROUP_ID_NOT_FOUND and "not a consumer group" in (r.error_message or "")

            def commit_at(member_epoch: int) -> int:
                part = OffsetCommitRequestPartition(
                    partition_index=i32(0),
                    committed_offset=i64(1),
                    committed_leader_epoch=i32(-1),
                    committed_metadata="",
                )
                req = OffsetCommitRequest(
                    group_id=GroupId("raw"),
                    generation_id_or_member_epoch=i32(member_epoch),
                    member_id="m-1",
                    topics=(CommitTopic(name=TopicName(TOPIC), partitions=(part,)),),
                )
                return int(conn.request(req).topics[0].partitions[0].error_code)

            assert commit_at(epoch) == Err.STALE_MEMBER_EPOCH  # m-1 has moved on to the next epoch
            assert commit_at(epoch + 1) == Err.NONE
            r = heartbeat(conn, "raw", "m-1", -1)  # leaves
            assert r.error_code == Err.NONE and r.member_epoch == -1
    finally:
        classic.close()
