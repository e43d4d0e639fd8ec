"""KIP-932 share groups on a three-broker cluster, where a share-partition's leader and the leader of its
``__share_group_state`` partition (its share coordinator) are mostly different brokers: the leader reads and
writes the state with ReadShareGroupState / WriteShareGroupState over an inter-broker connection.

Two confluent-kafka ShareConsumers get every record of a six-partition topic exactly once. A kill -9 of a
share-partition's leader moves it to a follower, which reads the state from the coordinator before serving:
accepted records are not delivered again, acquired but unacknowledged ones are, one delivery later. Raw
share-state requests check Kafka's answers: NOT_COORDINATOR away from the coordinator, fencing of stale leader
and state epochs, INVALID_REQUEST and UNKNOWN_TOPIC_OR_PARTITION for bad input, and FindCoordinator with key
type SHARE."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Message, Producer, ShareConsumer
from kio.schema.delete_share_group_state.v0.request import DeleteShareGroupStateRequest, DeleteStateData
from kio.schema.delete_share_group_state.v0.request import PartitionData as DeletePartition
from kio.schema.find_coordinator.v6.request import FindCoordinatorRequest
from kio.schema.initialize_share_group_state.v0.request import InitializeShareGroupStateRequest, InitializeStateData
from kio.schema.initialize_share_group_state.v0.request import PartitionData as InitPartition
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.read_share_group_state.v0.request import PartitionData as ReadPartition
from kio.schema.read_share_group_state.v0.request import ReadShareGroupStateRequest, ReadStateData
from kio.schema.read_share_group_state_summary.v1.request import PartitionData as SummaryPartition
from kio.schema.read_share_group_state_summary.v1.request import (
    ReadShareGroupStateSummaryRequest,
    ReadStateSummaryData,
)
from kio.schema.share_acknowledge.v1.request import (
    AcknowledgementBatch,
    AcknowledgePartition,
    AcknowledgeTopic,
    ShareAcknowledgeRequest,
)
from kio.schema.share_fetch.v1.request import FetchPartition, FetchTopic, ShareFetchRequest
from kio.schema.types import GroupId, TopicName
from kio.schema.write_share_group_state.v0.request import PartitionData as WritePartition
from kio.schema.write_share_group_state.v0.request import WriteShareGroupStateRequest, WriteStateData
from kio.static.primitive import i8, i32, i32Timedelta, i64

from epochlog.client.wire import Connection
from epochlog.codes import Err
from epochlog.server.cluster.local import LocalCluster
from tests.integration.cluster_helpers import create_topic, new_cluster, partition_info, wait_until

pytestmark = pytest.mark.integration

GROUP = "sg"
SETTINGS: dict[str, Any] = {
    "group_share_heartbeat_interval_ms": "300",
    "group_share_record_lock_duration_ms": "5000",
    "offsets_topic_num_partitions": "3",
}


@pytest.fixture(scope="module")
def share_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    lc = new_cluster(tmp_path_factory.mktemp("share"), 3, **SETTINGS).start()
    yield lc
    lc.stop()


def conn_to(lc: LocalCluster, node: int) -> Connection:
    n = lc.broker(node)
    return Connection(n.host, n.port, 10)


def topic_id(lc: LocalCluster, topic: str) -> uuid.UUID:
    def ask() -> uuid.UUID | None:
        with conn_to(lc, lc.broker_ids()[0]) as conn:
            r = conn.request(
                MetadataRequest(
                    topics=(MetadataRequestTopic(topic_id=None, name=TopicName(topic)),),
                    allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False,
                )
            )
        t = r.topics[0]
        return t.topic_id if t.error_code == Err.NONE and t.topic_id is not None else None

    found: uuid.UUID = wait_until(ask, 10, f"the id of {topic}")
    return found


def share_coordinator(lc: LocalCluster, key: str, via: int | None = None) -> int:
    """FindCoordinator with key type SHARE: the leader of the key's __share_group_state partition (the first
    ask creates the topic)."""

    def ask() -> int:
        live = [b for b in lc.broker_ids() if lc.nodes[f"broker-{b}"].alive]
        with conn_to(lc, via if via is not None else live[0]) as conn:
            r = conn.request(FindCoordinatorRequest(key_type=i8(2), coordinator_keys=(key,)))
        c = r.coordinators[0]
        return int(c.node_id) + 1 if c.error_code == Err.NONE else 0

    return int(wait_until(ask, 20, f"the share coordinator of {key}")) - 1


def group_coordinator(lc: LocalCluster, group: str) -> int:
    with conn_to(lc, lc.broker_ids()[0]) as conn:
        c = conn.request(FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,))).coordinators[0]
    return int(c.node_id) if c.error_code == Err.NONE else -1


def produce(bootstrap: str, topic: str, items: list[tuple[int, bytes]]) -> list[int]:
    """(partition, value) pairs, acknowledged by all in-sync replicas; their offsets, in order."""
    offsets: dict[tuple[int, bytes], int] = {}

    def done(err: Any, m: Message) -> None:
        assert err is None, err
        offsets[(m.partition() or 0, m.value() or b"")] = m.offset() or 0

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    for partition, v in items:
        p.produce(topic, v, partition=partition, on_delivery=done)
    assert p.flush(15) == 0
    return [offsets[item] for item in items]


def share_consumer(lc: LocalCluster, name: str, topic: str) -> ShareConsumer:
    c = ShareConsumer({"bootstrap.servers": lc.bootstrap, "group.id": GROUP, "client.id": name})
    c.subscribe([topic])
    return c


def records(c: ShareConsumer, timeout: float = 0.1) -> list[Message]:
    return [m for m in (c.poll(timeout) or []) if m.error() is None]


def test_two_share_consumers_read_every_partition_once_with_remote_coordinators(share_cluster: LocalCluster) -> None:
    lc, topic, parts = share_cluster, "queue", 6
    create_topic(lc.bootstrap, topic, parts, 3, {"min.insync.replicas": "2"})
    tid = topic_id(lc, topic)
    coordinators = {p: share_coordinator(lc, f"{GROUP}:{tid}:{p}") for p in range(parts)}
    leaders = {p: partition_info(lc.bootstrap, topic, p)[0] for p in range(parts)}
    # What this test is for: share-partitions whose state another broker keeps.
    assert any(leaders[p] != coordinators[p] for p in range(parts)), (leaders, coordinators)

    c1, c2 = share_consumer(lc, "c1", topic), share_consumer(lc, "c2", topic)
    try:
        # Each share-partition starts at the log end when first fetched: markers until every partition gave one.
        warmed: set[int] = set()
        deadline = time.monotonic() + 30
        while len(warmed) < parts:
            assert time.monotonic() < deadline, f"only partitions {warmed} delivered"
            produce(lc.bootstrap, topic, [(p, b"warm") for p in set(range(parts)) - warmed])
            for c in (c1, c2):
                warmed |= {m.partition() or 0 for m in records(c, 0.3)}

        values = {p: [b"p%d-%d" % (p, i) for i in range(40)] for p in range(parts)}
        produce(lc.bootstrap, topic, [(p, v) for p in range(parts) for v in values[p]])
        seen: dict[bytes, str] = {}
        want = {v for vs in values.values() for v in vs}
        deadline = time.monotonic() + 30
        while not want <= set(seen):
            assert time.monotonic() < deadline, f"{len(want - set(seen))} records never delivered"
            for name, c in (("c1", c1), ("c2", c2)):
                for m in records(c):
                    v = m.value() or b""
                    if v != b"warm":
                        assert v not in seen, f"{v!r} delivered twice"
                        seen[v] = name
        # Implicitly accepted by the next poll: an end marker on every partition, and nothing else comes back.
        produce(lc.bootstrap, topic, [(p, b"end") for p in range(parts)])
        ends: set[int] = set()
        deadline = time.monotonic() + 20
        while len(ends) < parts:
            assert time.monotonic() < deadline, f"end markers from {ends} only"
            for c in (c1, c2):
                for m in records(c):
                    assert m.value() in (b"warm", b"end"), f"{m.value()!r} delivered again"
                    if m.value() == b"end":
                        ends.add(m.partition() or 0)
        assert set(seen.values()) == {"c1", "c2"}
    finally:
        c1.close()
        c2.close()


# -- the share-state RPCs, raw ---------------------------------------------------------------------------------
def _read(conn: Connection, group: str, tid: uuid.UUID, leader_epoch: int) -> Any:
    part = ReadPartition(partition=i32(0), leader_epoch=i32(leader_epoch))
    r = conn.request(
        ReadShareGroupStateRequest(group_id=group, topics=(ReadStateData(topic_id=tid, partitions=(part,)),))
    )
    return r.results[0].partitions[0]


def _write(conn: Connection, tid: uuid.UUID, leader_epoch: int, state_epoch: int, start: int) -> int:
    part = WritePartition(
        partition=i32(0),
        state_epoch=i32(state_epoch),
        leader_epoch=i32(leader_epoch),
        start_offset=i64(start),
        state_batches=(),
    )
    r = conn.request(
        WriteShareGroupStateRequest(group_id="raw", topics=(WriteStateData(topic_id=tid, partitions=(part,)),))
    )
    return int(r.results[0].partitions[0].error_code)


def _initialize(conn: Connection, tid: uuid.UUID, state_epoch: int, start: int) -> int:
    part = InitPartition(partition=i32(0), state_epoch=i32(state_epoch), start_offset=i64(start))
    r = conn.request(
        InitializeShareGroupStateRequest(
            group_id="raw", topics=(InitializeStateData(topic_id=tid, partitions=(part,)),)
        )
    )
    return int(r.results[0].partitions[0].error_code)


def test_share_state_rpcs_answer_as_kafkas_coordinator(share_cluster: LocalCluster) -> None:
    lc = share_cluster
    create_topic(lc.bootstrap, "rawstate", 1, 3, {})
    tid = topic_id(lc, "rawstate")
    coordinator = share_coordinator(lc, f"raw:{tid}:0")
    assert share_coordinator(lc, f"raw:{tid}:0", via=coordinator) == coordinator  # every broker answers alike
    other = next(b for b in lc.broker_ids() if b != coordinator)
    with conn_to(lc, other) as conn:
        assert _read(conn, "raw", tid, 1).error_code == Err.NOT_COORDINATOR
        assert _write(conn, tid, 1, 0, 0) == Err.NOT_COORDINATOR
        found = conn.request(FindCoordinatorRequest(key_type=i8(2), coordinator_keys=("no-partition",)))
        assert found.coordinators[0].error_code == Err.INVALID_REQUEST
    with conn_to(lc, coordinator) as conn:
        r = _read(conn, "raw", tid, 5)
        assert (r.error_code, r.start_offset, r.state_batches) == (Err.NONE, -1, ())  # never initialized
        assert _write(conn, tid, 4, 0, 10) == Err.FENCED_LEADER_EPOCH  # the read at epoch 5 fenced epoch 4
        assert _write(conn, tid, 5, 0, 10) == Err.NONE
        assert _read(conn, "raw", tid, 5).start_offset == 10
        assert _initialize(conn, tid, 0, 20) == Err.FENCED_STATE_EPOCH
        assert _initialize(conn, tid, 1, 20) == Err.NONE
        assert _write(conn, tid, 5, 0, 30) == Err.FENCED_STATE_EPOCH
        summary = (
            conn.request(
                ReadShareGroupStateSummaryRequest(
                    group_id="raw",
                    topics=(
                        ReadStateSummaryData(
                            topic_id=tid, partitions=(SummaryPartition(partition=i32(0), leader_epoch=i32(0)),)
                        ),
                    ),
                )
            )
            .results[0]
            .partitions[0]
        )
        assert (summary.error_code, summary.state_epoch, summary.start_offset) == (Err.NONE, 1, 20)
        deleted = conn.request(
            DeleteShareGroupStateRequest(
                group_id="raw",
                topics=(DeleteStateData(topic_id=tid, partitions=(DeletePartition(partition=i32(0)),)),),
            )
        )
        assert deleted.results[0].partitions[0].error_code == Err.NONE
        assert _read(conn, "raw", tid, 0).start_offset == -1
        assert _read(conn, "", tid, 5).error_code == Err.INVALID_REQUEST
    unknown = uuid.uuid4()
    with conn_to(lc, share_coordinator(lc, f"raw:{unknown}:0")) as conn:
        assert _read(conn, "raw", unknown, 5).error_code == Err.UNKNOWN_TOPIC_OR_PARTITION


# -- failover of a share-partition's leader -----------------------------------------------------------------
def _share_fetch(conn: Connection, member: str, epoch: int, tid: uuid.UUID, p: int) -> Any:
    return conn.request(
        ShareFetchRequest(
            group_id=GroupId(GROUP),
            member_id=member,
            share_session_epoch=i32(epoch),
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=200)),
            min_bytes=i32(1),
            max_records=i32(100),
            batch_size=i32(100),
            topics=(
                FetchTopic(
                    topic_id=tid, partitions=(FetchPartition(partition_index=i32(p), acknowledgement_batches=()),)
                ),
            ),
            forgotten_topics_data=(),
        )
    )


@pytest.mark.long
def test_a_share_partitions_new_leader_keeps_its_state(tmp_path: Path) -> None:
    lc = new_cluster(tmp_path, 3, replica_lag_time_max_ms="3000", **SETTINGS).start()
    try:
        run_failover(lc)
    finally:
        lc.stop()


def run_failover(lc: LocalCluster) -> None:
    topic = "fo"
    create_topic(lc.bootstrap, topic, 3, 3, {"min.insync.replicas": "2"})
    tid = topic_id(lc, topic)
    coordinators = {p: share_coordinator(lc, f"{GROUP}:{tid}:{p}") for p in range(3)}
    leaders = {p: partition_info(lc.bootstrap, topic, p)[0] for p in range(3)}
    # Prefer a partition whose state another broker keeps (the kill then leaves the coordinator up).
    p = next((q for q in range(3) if leaders[q] != coordinators[q]), 0)
    leader = leaders[p]
    # The group's coordinator needs __consumer_offsets, which is not created with two of its three replicas'
    # brokers live: have it made now, as the first consumer would.
    wait_until(lambda: group_coordinator(lc, GROUP) >= 0, 20, "__consumer_offsets")

    # A member fetching by hand (ShareFetch does not ask for group membership): the share-partition starts at
    # the log end on the first fetch, then acquires ten records and accepts the first five.
    member = str(uuid.uuid4())
    with conn_to(lc, leader) as conn:
        assert _share_fetch(conn, member, 0, tid, p).error_code == Err.NONE
        offsets = produce(lc.bootstrap, topic, [(p, b"r%d" % i) for i in range(10)])
        acquired: list[tuple[int, int, int]] = []
        epoch = 1
        deadline = time.monotonic() + 15
        while sum(last - first + 1 for first, last, _n in acquired) < 10:
            assert time.monotonic() < deadline, acquired
            r = _share_fetch(conn, member, epoch, tid, p)
            epoch += 1
            assert r.error_code == Err.NONE and r.responses[0].partitions[0].error_code == Err.NONE, r
            acquired += [
                (int(a.first_offset), int(a.last_offset), int(a.delivery_count))
                for a in r.responses[0].partitions[0].acquired_records
            ]
        assert {n for _f, _l, n in acquired} == {1}
        batch = AcknowledgementBatch(
            first_offset=i64(offsets[0]), last_offset=i64(offsets[4]), acknowledge_types=(i8(1),)
        )
        ack = conn.request(
            ShareAcknowledgeRequest(
                group_id=GroupId(GROUP),
                member_id=member,
                share_session_epoch=i32(epoch),
                topics=(
                    AcknowledgeTopic(
                        topic_id=tid,
                        partitions=(AcknowledgePartition(partition_index=i32(p), acknowledgement_batches=(batch,)),),
                    ),
                ),
            )
        )
        assert ack.error_code == Err.NONE and ack.responses[0].partitions[0].error_code == Err.NONE, ack

    lc.kill9(f"broker-{leader}")
    wait_until(lambda: partition_info(lc.bootstrap, topic, p)[0] not in (leader, -1), 30, "a new leader")

    c = share_consumer(lc, "after", topic)
    try:
        got: list[tuple[bytes, int]] = []
        deadline = time.monotonic() + 40
        while len(got) < 5:
            assert time.monotonic() < deadline, got
            got += [(m.value() or b"", m.delivery_count() or 0) for m in records(c, 0.3)]
        produce(lc.bootstrap, topic, [(p, b"end")])
        deadline = time.monotonic() + 20
        while not any(v == b"end" for v, _n in got):
            assert time.monotonic() < deadline, got
            got += [(m.value() or b"", m.delivery_count() or 0) for m in records(c, 0.3)]
        # The accepted five never come back; the other five come back once each, on their second delivery.
        assert sorted(got) == sorted([(b"r%d" % i, 2) for i in range(5, 10)] + [(b"end", 1)]), got
    finally:
        c.close()
