"""CreatePartitions with explicit replica lists on real processes (one controller, three brokers): the
replicas asked for are the replicas Metadata reports afterwards, through confluent-kafka's and
kafka-python's admin clients; bad lists are refused with Kafka's codes and words and add nothing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions
from kafka import KafkaAdminClient

from epochlog.server.cluster.local import LocalCluster
from tests.integration.cluster_helpers import create_topic, new_cluster, wait_until
from tests.integration.helpers import topic_name

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def lc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = new_cluster(tmp_path_factory.mktemp("growth"), brokers=3)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def replicas(bootstrap: str, topic: str) -> dict[int, list[int]]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {p: list(m.replicas) for p, m in md.topics[topic].partitions.items()}


def grown(bootstrap: str, topic: str, count: int) -> dict[int, list[int]] | None:
    r = replicas(bootstrap, topic)
    return r if len(r) == count else None


def test_confluent_replica_assignment_is_honoured(lc: LocalCluster) -> None:
    topic = topic_name("grow")
    create_topic(lc.bootstrap, topic, 1, 2, {})
    admin = AdminClient({"bootstrap.servers": lc.bootstrap})
    wanted = [[3, 1], [2, 3], [1, 2]]
    admin.create_partitions([NewPartitions(topic, 4, replica_assignment=wanted)])[topic].result(30)
    got = wait_until(lambda: grown(lc.bootstrap, topic, 4), 20, "4 partitions")
    assert [got[p] for p in (1, 2, 3)] == wanted


@pytest.mark.parametrize(
    ("wanted", "words"),
    [
        ([[1, 2]], "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."),
        ([[1, 9], [1, 2]], "includes broker 9, but no such broker is registered"),
        ([[1, 1], [1, 2]], "includes the broker 1 more than once"),
        ([[1, 2, 3], [1, 2, 3]], "a partition with 3 replica(s), but this is not consistent"),
    ],
)
def test_confluent_bad_assignments_are_refused(lc: LocalCluster, wanted: list[list[int]], words: str) -> None:
    topic = topic_name("bad")
    create_topic(lc.bootstrap, topic, 1, 2, {})
    admin = AdminClient({"bootstrap.servers": lc.bootstrap})
    with pytest.raises(KafkaException) as e:
        admin.create_partitions([NewPartitions(topic, 3, replica_assignment=wanted)])[topic].result(30)
    err = e.value.args[0]
    assert err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT and words in err.str()
    assert len(replicas(lc.bootstrap, topic)) == 1


def test_kafka_python_assignments_and_validate_only(lc: LocalCluster) -> None:
    topic = topic_name("growpy")
    create_topic(lc.bootstrap, topic, 2, 3, {})
    a = KafkaAdminClient(bootstrap_servers=lc.bootstrap, request_timeout_ms=30000)
    try:
        resp = a.create_partitions({topic: {"count": 3, "assignments": [[2, 3, 1]]}}, validate_only=True)
        assert [r.error_code for r in resp.results] == [0]
        assert len(replicas(lc.bootstrap, topic)) == 2, "validate_only added a partition"
        resp = a.create_partitions({topic: {"count": 3, "assignments": [[2, 3]]}}, raise_errors=False)
        assert [r.error_code for r in resp.results] == [39]  # INVALID_REPLICA_ASSIGNMENT: RF is 3
        resp = a.create_partitions({topic: {"count": 3, "assignments": [[2, 3, 1]]}})
        assert [r.error_code for r in resp.results] == [0]
    finally:
        a.close()
    got = wait_until(lambda: grown(lc.bootstrap, topic, 3), 20, "3 partitions")
    assert got[2] == [2, 3, 1]
