"""Partition reassignment on real processes (one controller, four brokers on 127.0.0.1) through kafka-python's
admin client: a move {1,2,3} -> {4,2,3} under acks=all load that removes the leader and loses nothing
acknowledged, the removed replica's log deleted; cancel; bad targets refused with Kafka's codes and nothing
changed; CreateTopics with explicit assignments (kafka-python and confluent-kafka) and its validation;
DescribeLogDirs."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTP
from kafka.errors import InvalidReplicationAssignmentError, InvalidRequestError, NoReassignmentInProgressError

from epochlog.server.cluster.local import LocalCluster
from tests.integration.cluster_helpers import AckingProducer, new_cluster, partition_info, wait_until

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def lc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = new_cluster(tmp_path_factory.mktemp("reassign"), brokers=4, replica_lag_time_max_ms="10000")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def admin(lc: LocalCluster) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=lc.bootstrap, request_timeout_ms=30000)


def create_assigned(lc: LocalCluster, name: str, assignments: dict[int, list[int]]) -> dict[str, Any]:
    a = admin(lc)
    try:
        resp = a.create_topics({name: {"assignments": assignments}}, raise_errors=False)
    finally:
        a.close()
    return resp


def topic_errors(resp: Any) -> dict[str, int]:
    """{topic: error code} from kafka-python's CreateTopics answer (a response object or its dict form)."""
    topics = resp["topics"] if isinstance(resp, dict) else resp.topics
    out = {}
    for t in topics:
        if isinstance(t, dict):
            out[t["name"]] = t["error_code"]
        elif hasattr(t, "name"):
            out[t.name] = t.error_code
        else:
            out[t[0]] = t[1]
    return out


def replicas_of(lc: LocalCluster, topic: str, partition: int = 0) -> tuple[int, list[int], list[int]]:
    return partition_info(lc.bootstrap, topic, partition)


def read_all(bootstrap: str, topic: str, timeout: float = 60) -> list[bytes]:
    """Every record of partition 0 from offset 0 to the end the leader reports."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    try:
        _low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[bytes] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                if out and len(out) >= high:
                    break
                continue
            assert not m.error(), m.error()
            out.append(m.value())
            if m.offset() >= high - 1:
                break
        return out
    finally:
        c.close()


def partition_dir(lc: LocalCluster, broker: int, topic: str) -> Path:
    return lc.data_dir / f"broker-{broker}" / f"{topic}-0"


def test_create_topics_with_assignments_and_its_validation(lc: LocalCluster) -> None:
    name = f"assigned-{uuid.uuid4().hex[:6]}"
    assert topic_errors(create_assigned(lc, name, {0: [3, 1], 1: [4, 2]})) == {name: 0}
    wait_until(lambda: replicas_of(lc, name, 1)[0] == 4, 15, "the assigned leader")
    assert replicas_of(lc, name, 0)[1] == [3, 1] and replicas_of(lc, name, 1)[1] == [4, 2]
    bad = {
        "dup": {0: [1, 1]},
        "unknown": {0: [1, 99]},
        "uneven": {0: [1, 2], 1: [3]},
        "gap": {0: [1], 2: [2]},
    }
    for suffix, assignment in bad.items():
        t = f"bad-{suffix}-{uuid.uuid4().hex[:6]}"
        assert topic_errors(create_assigned(lc, t, assignment)) == {t: InvalidReplicationAssignmentError.errno}, suffix
    # num_partitions or replication_factor given with assignments: INVALID_REQUEST, as Kafka answers.
    for extra in ({"num_partitions": 1}, {"replication_factor": 2}):
        t = f"bad-count-{uuid.uuid4().hex[:6]}"
        a = admin(lc)
        try:
            resp = a.create_topics({t: {"assignments": {0: [1, 2]}, **extra}}, raise_errors=False)
        finally:
            a.close()
        assert topic_errors(resp) == {t: InvalidRequestError.errno}, extra
    c = AdminClient({"bootstrap.servers": lc.bootstrap})
    # librdkafka's replica_assignment is the same field; a good one is accepted
    t = f"rdkafka-{uuid.uuid4().hex[:6]}"
    c.create_topics([NewTopic(t, num_partitions=2, replica_assignment=[[2, 4], [4, 2]])])[t].result(15)
    wait_until(lambda: replicas_of(lc, t, 0)[1] == [2, 4], 15, "librdkafka's assignment")
    md = c.list_topics(timeout=10).topics
    assert not any(n.startswith("bad-") for n in md), "a refused topic was created"


def test_bad_targets_are_refused_and_change_nothing(lc: LocalCluster) -> None:
    name = f"bad-target-{uuid.uuid4().hex[:6]}"
    assert topic_errors(create_assigned(lc, name, {0: [1, 2, 3]})) == {name: 0}
    wait_until(lambda: replicas_of(lc, name)[2] == [1, 2, 3], 15, "the topic in sync")
    a = admin(lc)
    try:
        tp = KTP(name, 0)
        assert a.alter_partition_reassignments({tp: [1, 2, 99]}) == {tp: InvalidReplicationAssignmentError}
        assert a.alter_partition_reassignments({tp: [2, 2, 3]}) == {tp: InvalidReplicationAssignmentError}
        assert a.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}
        assert a.list_partition_reassignments() == {}
    finally:
        a.close()
    assert replicas_of(lc, name)[1] == [1, 2, 3]


def test_move_under_acks_all_load_removes_the_leader_and_loses_nothing(lc: LocalCluster) -> None:
    name = f"moving-{uuid.uuid4().hex[:6]}"
    assert topic_errors(create_assigned(lc, name, {0: [1, 2, 3]})) == {name: 0}
    wait_until(lambda: replicas_of(lc, name)[0] == 1, 15, "broker 1 to lead")
    producer = AckingProducer(lc.bootstrap, name).start()
    wait_until(lambda: len(producer.acked) > 20000, 60, "acknowledged records before the move")
    a = admin(lc)
    try:
        tp = KTP(name, 0)
        # 4 first: it is preferred, so it leads once in sync; completing before it caught up would lose data
        assert a.alter_partition_reassignments({tp: [4, 2, 3]}) == {tp: None}
        wait_until(lambda: a.list_partition_reassignments() == {}, 60, "the reassignment to complete")
    finally:
        a.close()
    wait_until(lambda: replicas_of(lc, name)[1] == [4, 2, 3], 15, "the new replica set in Metadata")
    leader, _replicas, isr = replicas_of(lc, name)
    assert leader in (2, 3, 4) and set(isr) <= {2, 3, 4}
    time.sleep(1)  # keep producing at the new leader for a moment
    producer.stop()
    assert not producer.errors, producer.errors[:5]
    values = read_all(lc.bootstrap, name)
    missing = set(producer.acked) - set(values)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
    # the removed replica's log is deleted once the metadata says so; the new one holds the data
    wait_until(lambda: not partition_dir(lc, 1, name).exists(), 15, "broker 1 to delete its replica")
    a = admin(lc)
    try:
        dirs = a.describe_log_dirs(topic_partitions={name: [0]}, brokers=[4])
    finally:
        a.close()
    assert _replica_size(dirs, name) > 0


def _replica_size(described: list[dict[str, Any]], topic: str) -> int:
    """The size DescribeLogDirs reports for ``topic``-0, from kafka-python's per-broker answer."""
    for broker in described:
        for d in broker["log_dirs"]:
            assert d["error_code"] == 0
            assert d["total_bytes"] >= d["usable_bytes"] > 0
            for t in d["topics"]:
                for p in t["partitions"] if t["name"] == topic else ():
                    if p["partition_index"] == 0:
                        assert p["is_future_key"] is False and p["offset_lag"] == 0
                        return int(p["partition_size"])
    raise AssertionError(f"{topic}-0 not in {described!r}")


def test_cancel_reverts_to_the_original_replicas(lc: LocalCluster) -> None:
    name = f"cancel-{uuid.uuid4().hex[:6]}"
    assert topic_errors(create_assigned(lc, name, {0: [1, 2, 3]})) == {name: 0}
    wait_until(lambda: replicas_of(lc, name)[2] == [1, 2, 3], 15, "the topic in sync")
    lc.stop_node("broker-4")  # a target replica that cannot catch up keeps the reassignment going
    try:
        a = admin(lc)
        try:
            tp = KTP(name, 0)
            assert a.alter_partition_reassignments({tp: [1, 2, 4]}) == {tp: None}
            ongoing = a.list_partition_reassignments()
            assert ongoing == {tp: {"replicas": [1, 2, 4, 3], "adding_replicas": [4], "removing_replicas": [3]}}
            assert a.alter_partition_reassignments({tp: None}) == {tp: None}
            assert a.list_partition_reassignments() == {}
        finally:
            a.close()
        wait_until(lambda: sorted(replicas_of(lc, name)[1]) == [1, 2, 3], 15, "the original replicas")
        assert replicas_of(lc, name)[0] == 1
    finally:
        lc.start_node("broker-4")


def test_a_broker_down_during_the_move_deletes_its_stray_replica_at_start(lc: LocalCluster) -> None:
    name = f"stray-{uuid.uuid4().hex[:6]}"
    assert topic_errors(create_assigned(lc, name, {0: [1, 2, 3]})) == {name: 0}
    wait_until(lambda: replicas_of(lc, name)[2] == [1, 2, 3], 15, "the topic in sync")
    assert partition_dir(lc, 1, name).exists()
    lc.stop_node("broker-1")
    try:
        a = admin(lc)
        try:
            tp = KTP(name, 0)
            assert a.alter_partition_reassignments({tp: [2, 3, 4]}) == {tp: None}
            wait_until(lambda: a.list_partition_reassignments() == {}, 30, "the move to complete without broker 1")
        finally:
            a.close()
        assert partition_dir(lc, 1, name).exists()  # nobody could tell the stopped broker
    finally:
        lc.start_node("broker-1")
    wait_until(lambda: not partition_dir(lc, 1, name).exists(), 30, "broker 1 to drop the replica it lost")
    assert replicas_of(lc, name)[1] == [2, 3, 4]
