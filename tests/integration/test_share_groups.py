"""KIP-932 share groups against a real broker: confluent-kafka ShareConsumers share one partition, every record
is delivered and accepted once between them; RELEASE redelivers, REJECT does not, a consumer that stops
polling has its records redelivered once its acquisition locks run out, a record released too often is
archived, and accepted records stay accepted across a broker restart (``__share_group_state``). Raw requests
check Kafka's answers to acknowledging what one does not hold, a stale member epoch and unknown sessions."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.share_acknowledge.v1.request import AcknowledgementBatch as AckBatch
from kio.schema.share_acknowledge.v1.request import AcknowledgePartition, AcknowledgeTopic, ShareAcknowledgeRequest
from kio.schema.share_fetch.v1.request import FetchPartition, FetchTopic, ShareFetchRequest
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from epochlog.client.configs import alter as alter_configs
from epochlog.client.wire import Connection
from epochlog.codes import Err
from epochlog.config_defs import RESOURCE_GROUP
from tests.broker_process import BrokerProcess

TOPIC = "queue"
LOCK_MS = 2000
SETTINGS = {
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.heartbeat.interval.ms": "300",
    "group.share.delivery.count.limit": "3",
}


def share_consumer(b: BrokerProcess, name: str, explicit: bool = False, group: str = "sg") -> ShareConsumer:
    c = ShareConsumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": group,
            "client.id": name,
            "share.acknowledgement.mode": "explicit" if explicit else "implicit",
        }
    )
    c.subscribe([TOPIC])
    return c


def produce(b: BrokerProcess, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0})
    for v in values:
        p.produce(TOPIC, v)
    assert p.flush(10) == 0


def records(c: ShareConsumer, timeout: float = 0.2) -> list[Message]:
    return [m for m in (c.poll(timeout) or []) if m.error() is None]


def setup(broker_factory: Any) -> BrokerProcess:
    """A broker with the topic, where group "sg" starts reading at the log start (the group config
    share.auto.offset.reset=earliest; the default, latest, would start it wherever the log ends when its
    first consumer fetches, after some of what a test produces)."""
    b: BrokerProcess = broker_factory(SETTINGS)
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(15)
    alter_configs(b.bootstrap, RESOURCE_GROUP, "sg", {"share.auto.offset.reset": "earliest"}, [])
    return b


def poll_until(
    consumers: list[ShareConsumer], done: Callable[[], bool], timeout: float, on: Callable[..., None]
) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "timed out"
        for c in consumers:
            for m in records(c, 0.05):
                on(c, m)


def test_two_share_consumers_share_a_partition(broker_factory: Any) -> None:
    b = setup(broker_factory)
    c1, c2 = share_consumer(b, "c1"), share_consumer(b, "c2")
    try:
        values = [b"v%d" % i for i in range(300)]
        produce(b, values)
        seen: dict[bytes, str] = {}

        def take(c: ShareConsumer, m: Message) -> None:
            v = m.value()
            assert v not in seen, f"{v!r} delivered twice"
            seen[v] = "c1" if c is c1 else "c2"

        poll_until([c1, c2], lambda: len(seen) == len(values), 30, take)
        # Implicit acknowledgement: the next poll accepted them. Nothing comes back, not even after the locks.
        produce(b, [b"end"])
        extra: list[bytes] = []
        poll_until([c1, c2], lambda: b"end" in extra, 10, lambda _c, m: extra.append(m.value()))
        assert extra == [b"end"]

        host, port = b.bootstrap.split(":")
        with Connection(host, int(port), 10) as conn:

            def described() -> Any:
                req = ShareGroupDescribeRequest(group_ids=(GroupId("sg"),), include_authorized_operations=False)
                return conn.request(req).groups[0]

            # A consumer that found nothing left to read may still be joining: both keep polling (and so
            # heartbeating) until the group holds them both.
            poll_until([c1, c2], lambda: len(described().members) == 2, 15, lambda _c, m: extra.append(m.value()))
            assert extra == [b"end"]
            g = described()
            assert g.error_code == Err.NONE and g.group_state == "Stable" and len(g.members) == 2
            assert {m.client_id for m in g.members} == {"c1", "c2"}
            listed = conn.request(ListGroupsRequest(states_filter=(), types_filter=()))
            assert [(g.group_id, g.group_type, g.protocol_type) for g in listed.groups] == [("sg", "share", "share")]
    finally:
        c1.close()
        c2.close()


def test_release_reject_lock_timeout_and_delivery_limit(broker_factory: Any) -> None:
    b = setup(broker_factory)
    c1 = share_consumer(b, "c1", explicit=True)
    try:
        produce(b, [b"release", b"reject", b"accept"])
        counts: dict[bytes, list[int]] = {}
        deadline = time.monotonic() + 20
        # RELEASE comes back with one more delivery each time, until the limit (3) archives it; REJECT and
        # ACCEPT never come back.
        while len(counts.get(b"release", [])) < 3:
            assert time.monotonic() < deadline, counts
            for m in records(c1):
                counts.setdefault(m.value(), []).append(m.delivery_count())
                kind = {b"release": AcknowledgeType.RELEASE, b"reject": AcknowledgeType.REJECT}
                c1.acknowledge(m, kind.get(m.value(), AcknowledgeType.ACCEPT))
            c1.commit_sync(10)
        assert counts[b"release"] == [1, 2, 3]
        produce(b, [b"after"])
        later: list[bytes] = []
        deadline = time.monotonic() + 10
        while b"after" not in later:
            assert time.monotonic() < deadline
            for m in records(c1):
                later.append(m.value())
                c1.acknowledge(m, AcknowledgeType.ACCEPT)
            c1.commit_sync(10)
        assert later == [b"after"], later  # the released record was archived at its third delivery
        assert counts[b"reject"] == [1] and counts[b"accept"] == [1]
    finally:
        c1.close()


def test_a_stalled_consumers_records_go_to_another(broker_factory: Any) -> None:
    b = setup(broker_factory)
    stalled = share_consumer(b, "stalled", explicit=True)
    other = share_consumer(b, "other")
    try:
        produce(b, [b"held-%d" % i for i in range(5)])
        held: list[Message] = []
        deadline = time.monotonic() + 15
        while len(held) < 5:
            assert time.monotonic() < deadline
            held += records(stalled)
        # The stalled consumer never acknowledges nor polls again: its locks run out and the other one gets them.
        start = time.monotonic()
        got: list[tuple[bytes, int]] = []
        poll_until([other], lambda: len(got) >= 5, 20, lambda _c, m: got.append((m.value(), m.delivery_count())))
        assert time.monotonic() - start >= LOCK_MS / 1000 - 0.5
        assert sorted(got) == sorted((b"held-%d" % i, 2) for i in range(5))
    finally:
        other.close()
        stalled.close()


@pytest.mark.long
def test_accepted_records_stay_accepted_across_a_restart(broker_factory: Any) -> None:
    b = setup(broker_factory)
    c = share_consumer(b, "c", explicit=True)
    try:
        produce(b, [b"r%d" % i for i in range(10)])
        got: list[Message] = []
        deadline = time.monotonic() + 15
        while len(got) < 10:
            assert time.monotonic() < deadline
            got += records(c)
        for m in got:
            accept = int(m.value()[1:]) < 5
            c.acknowledge(m, AcknowledgeType.ACCEPT if accept else AcknowledgeType.RELEASE)
        c.commit_sync(10)
    finally:
        c.close()
    epoch = describe(b)[0]
    assert epoch >= 2  # a join and a leave
    b.kill9()
    b.start()
    # The group comes back from its records in __consumer_offsets: the same epoch, not a new group.
    deadline = time.monotonic() + 15
    while (after := describe(b)) != (epoch, "Empty"):
        assert time.monotonic() < deadline, after
        time.sleep(0.1)
    c = share_consumer(b, "c-again")
    try:
        again: list[bytes] = []
        poll_until([c], lambda: len(again) >= 5, 30, lambda _c, m: again.append(m.value()))
        produce(b, [b"new"])
        poll_until([c], lambda: b"new" in again, 10, lambda _c, m: again.append(m.value()))
        assert sorted(again) == sorted([b"r5", b"r6", b"r7", b"r8", b"r9", b"new"]), again
    finally:
        c.close()


def describe(b: BrokerProcess) -> tuple[int, str]:
    host, port = b.bootstrap.split(":")
    with Connection(host, int(port), 10) as conn:
        r = conn.request(ShareGroupDescribeRequest(group_ids=(GroupId("sg"),), include_authorized_operations=False))
    return int(r.groups[0].group_epoch), r.groups[0].group_state


# -- raw requests ------------------------------------------------------------------------------------
def _heartbeat(conn: Connection, member: str, epoch: int) -> Any:
    return conn.request(
        ShareGroupHeartbeatRequest(
            group_id=GroupId("raw"),
            member_id=member,
            member_epoch=i32(epoch),
            subscribed_topic_names=(TopicName(TOPIC),) if epoch == 0 else None,
        )
    )


def _fetch(conn: Connection, member: str, epoch: int, topic_id: uuid.UUID, acks: tuple[Any, ...] = ()) -> Any:
    part = FetchPartition(partition_index=i32(0), acknowledgement_batches=acks)
    return conn.request(
        ShareFetchRequest(
            group_id=GroupId("raw"),
            member_id=member,
            share_session_epoch=i32(epoch),
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=200)),
            min_bytes=i32(1),
            max_records=i32(100),
            batch_size=i32(100),
            topics=(FetchTopic(topic_id=topic_id, partitions=(part,)),),
            forgotten_topics_data=(),
        )
    )


def _ack(conn: Connection, member: str, epoch: int, topic_id: uuid.UUID, first: int, last: int) -> Any:
    batch = AckBatch(first_offset=i64(first), last_offset=i64(last), acknowledge_types=(i8(1),))
    part = AcknowledgePartition(partition_index=i32(0), acknowledgement_batches=(batch,))
    return conn.request(
        ShareAcknowledgeRequest(
            group_id=GroupId("raw"),
            member_id=member,
            share_session_epoch=i32(epoch),
            topics=(AcknowledgeTopic(topic_id=topic_id, partitions=(part,)),),
        )
    )


def test_kafkas_answers_to_bad_share_requests(broker_factory: Any) -> None:
    b = setup(broker_factory)
    host, port = b.bootstrap.split(":")
    with Connection(host, int(port), 10) as conn:
        deadline = time.monotonic() + 15
        while True:  # the first FindCoordinator creates __consumer_offsets
            found = conn.request(FindCoordinatorRequest(key_type=i8(0), coordinator_keys=("raw",)))
            if found.coordinators[0].error_code == Err.NONE:
                break
            assert time.monotonic() < deadline, found
            time.sleep(0.1)
        r = _heartbeat(conn, str(uuid.uuid4()), 0)
        assert r.error_code == Err.NONE and r.member_epoch >= 1, r
        member, epoch = r.member_id, int(r.member_epoch)
        topic_id = r.assignment.topic_partitions[0].topic_id
        assert _heartbeat(conn, member, epoch + 5).error_code == Err.FENCED_MEMBER_EPOCH

        a, other = str(uuid.uuid4()), str(uuid.uuid4())
        assert _fetch(conn, a, 3, topic_id).error_code == Err.SHARE_SESSION_NOT_FOUND
        assert _ack(conn, a, 0, topic_id, 0, 0).error_code == Err.INVALID_SHARE_SESSION_EPOCH
        assert _fetch(conn, a, 0, topic_id).error_code == Err.NONE  # opens; the share-partition starts here
        assert _fetch(conn, other, 0, topic_id).error_code == Err.NONE
        produce(b, [b"x", b"y"])
        r = _fetch(conn, a, 1, topic_id)
        assert r.error_code == Err.NONE
        acquired = r.responses[0].partitions[0].acquired_records
        first, last = int(acquired[0].first_offset), int(acquired[-1].last_offset)
        assert last - first == 1
        # The other member acknowledges records it does not hold.
        r = _ack(conn, other, 1, topic_id, first, last)
        assert r.error_code == Err.NONE and r.responses[0].partitions[0].error_code == Err.INVALID_RECORD_STATE
        assert _ack(conn, other, 1, topic_id, first, last).error_code == Err.INVALID_SHARE_SESSION_EPOCH
        r = _ack(conn, a, 2, topic_id, first, last)
        assert r.responses[0].partitions[0].error_code == Err.NONE
