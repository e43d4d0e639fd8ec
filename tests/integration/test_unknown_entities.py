"""Requests naming things that do not exist get Kafka's answers, not success, and change nothing.
One case per API the broker serves where a topic, partition, topic id, group or member can be named."""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.broker_process import BrokerProcess
from tests.integration.helpers import create_topic, topic_name
from tests.integration.kafka_wire import WireClient, schema_module

UNKNOWN_TOPIC_OR_PARTITION = 3
UNKNOWN_MEMBER_ID = 25
GROUP_ID_NOT_FOUND = 69
UNKNOWN_TOPIC_ID = 100
TIMEOUT = datetime.timedelta(seconds=5)


def _req(port: int, key: int, version: int, **fields: Any) -> Any:
    wire = WireClient(port)
    try:
        return wire.request(key, version, **fields)
    finally:
        wire.close()


def _produce(port: int, topic: str, partition: int) -> int:
    m = schema_module(0, 9)
    from epochlog.protocol.records import build_batch

    data = m.PartitionProduceData(index=partition, records=build_batch([(None, b"x")]))
    r = _req(
        port,
        0,
        9,
        transactional_id=None,
        acks=1,
        timeout=TIMEOUT,
        topic_data=(m.TopicProduceData(name=topic, partition_data=(data,)),),
    )
    return int(r.responses[0].partition_responses[0].error_code)


def _fetch_by_id(port: int, topic_id: uuid.UUID) -> int:
    m = schema_module(1, 13)
    r = _req(
        port,
        1,
        13,
        replica_id=-1,
        max_wait=datetime.timedelta(0),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(
            m.FetchTopic(
                topic_id=topic_id,
                partitions=(
                    m.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )
    return int(r.responses[0].partitions[0].error_code)


def _list_offsets(port: int, topic: str, partition: int) -> int:
    m = schema_module(2, 7)
    r = _req(
        port,
        2,
        7,
        replica_id=-1,
        isolation_level=0,
        topics=(
            m.ListOffsetsTopic(
                name=topic,
                partitions=(m.ListOffsetsPartition(partition_index=partition, current_leader_epoch=-1, timestamp=-1),),
            ),
        ),
    )
    return int(r.topics[0].partitions[0].error_code)


def _epoch(port: int, topic: str, partition: int) -> int:
    m = schema_module(23, 4)
    r = _req(
        port,
        23,
        4,
        replica_id=-1,
        topics=(
            m.OffsetForLeaderTopic(
                topic=topic,
                partitions=(m.OffsetForLeaderPartition(partition=partition, current_leader_epoch=-1, leader_epoch=0),),
            ),
        ),
    )
    return int(r.topics[0].partitions[0].error_code)


def _commit(port: int, topic: str, partition: int) -> int:
    m = schema_module(8, 8)
    r = _req(
        port,
        8,
        8,
        group_id="g-unknown",
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            m.OffsetCommitRequestTopic(
                name=topic,
                partitions=(
                    m.OffsetCommitRequestPartition(
                        partition_index=partition,
                        committed_offset=5,
                        committed_leader_epoch=-1,
                        committed_metadata=None,
                    ),
                ),
            ),
        ),
    )
    return int(r.topics[0].partitions[0].error_code)


def _describe_configs(port: int, topic: str) -> int:
    m = schema_module(32, 4)
    r = _req(
        port,
        32,
        4,
        resources=(m.DescribeConfigsResource(resource_type=2, resource_name=topic, configuration_keys=None),),
        include_synonyms=False,
        include_documentation=False,
    )
    return int(r.results[0].error_code)


def _delete_topic(port: int, topic: str) -> int:
    r = _req(port, 20, 5, topic_names=(topic,), timeout=TIMEOUT)
    return int(r.responses[0].error_code)


def _create_partitions(port: int, topic: str) -> int:
    m = schema_module(37, 3)
    r = _req(
        port,
        37,
        3,
        topics=(m.CreatePartitionsTopic(name=topic, count=3, assignments=None),),
        timeout=TIMEOUT,
        validate_only=False,
    )
    return int(r.results[0].error_code)


def _elect(port: int, topic: str) -> int:
    m = schema_module(43, 2)
    r = _req(
        port,
        43,
        2,
        election_type=0,
        topic_partitions=(m.TopicPartitions(topic=topic, partitions=(0,)),),
        timeout=TIMEOUT,
    )
    return int(r.replica_election_results[0].partition_result[0].error_code)


def _heartbeat(port: int) -> int:
    return int(_req(port, 12, 4, group_id="g-none", generation_id=1, member_id="m", group_instance_id=None).error_code)


def _describe_group(port: int) -> int:
    return int(_req(port, 15, 6, groups=("g-none",), include_authorized_operations=False).groups[0].error_code)


def _delete_group(port: int) -> int:
    return int(_req(port, 42, 2, groups_names=("g-none",)).results[0].error_code)


def _delete_records(port: int, topic: str, partition: int) -> int:
    m = schema_module(21, 2)
    parts = (m.DeleteRecordsPartition(partition_index=partition, offset=0),)
    r = _req(port, 21, 2, topics=(m.DeleteRecordsTopic(name=topic, partitions=parts),), timeout=TIMEOUT)
    return int(r.topics[0].partitions[0].error_code)


def _offset_delete(port: int, group: str, topic: str, of_partition: bool = False) -> int:
    """The group's error, or the partition's (answered by the broker, before the group is looked at)."""
    m = schema_module(47, 0)
    parts = (m.OffsetDeleteRequestPartition(partition_index=0),)
    r = _req(port, 47, 0, group_id=group, topics=(m.OffsetDeleteRequestTopic(name=topic, partitions=parts),))
    return int(r.topics[0].partitions[0].error_code) if of_partition else int(r.error_code)


def _reassign(port: int, topic: str, partition: int) -> int:
    m = schema_module(45, 0)
    parts = (m.ReassignablePartition(partition_index=partition, replicas=(1,)),)
    r = _req(port, 45, 0, timeout=TIMEOUT, topics=(m.ReassignableTopic(name=topic, partitions=parts),))
    return int(r.responses[0].partitions[0].error_code)


def _list_reassignments(port: int, topic: str) -> int:
    """ListPartitionReassignments leaves an unknown topic out of its answer, as Kafka does: 0 if it did."""
    m = schema_module(46, 0)
    topics = (m.ListPartitionReassignmentsTopics(name=topic, partition_indexes=(0,)),)
    r = _req(port, 46, 0, timeout=TIMEOUT, topics=topics)
    return int(r.error_code) + len(r.topics)


CASES: dict[str, tuple[Callable[[int, str], int], int]] = {
    "AlterPartitionReassignments of a missing topic": (
        lambda port, t: _reassign(port, "no-such-topic", 0),
        UNKNOWN_TOPIC_OR_PARTITION,
    ),
    "AlterPartitionReassignments of a missing partition": (
        lambda port, t: _reassign(port, t, 9),
        UNKNOWN_TOPIC_OR_PARTITION,
    ),
    "ListPartitionReassignments of a missing topic": (lambda port, t: _list_reassignments(port, "no-such-topic"), 0),
    "DeleteRecords of a missing topic": (
        lambda port, t: _delete_records(port, "no-such-topic", 0),
        UNKNOWN_TOPIC_OR_PARTITION,
    ),
    "DeleteRecords of a missing partition": (lambda port, t: _delete_records(port, t, 9), UNKNOWN_TOPIC_OR_PARTITION),
    "OffsetDelete of a missing group": (lambda port, t: _offset_delete(port, "g-none", t), GROUP_ID_NOT_FOUND),
    "OffsetDelete of a missing topic": (
        lambda port, t: _offset_delete(port, "g-none", "no-such-topic", of_partition=True),
        UNKNOWN_TOPIC_OR_PARTITION,
    ),
    "Produce to a missing topic": (lambda port, t: _produce(port, "no-such-topic", 0), UNKNOWN_TOPIC_OR_PARTITION),
    "Produce to a missing partition": (lambda port, t: _produce(port, t, 9), UNKNOWN_TOPIC_OR_PARTITION),
    "Fetch by an unknown topic id": (lambda port, t: _fetch_by_id(port, uuid.uuid4()), UNKNOWN_TOPIC_ID),
    "ListOffsets of a missing partition": (lambda port, t: _list_offsets(port, t, 9), UNKNOWN_TOPIC_OR_PARTITION),
    "OffsetForLeaderEpoch of a missing topic": (
        lambda port, t: _epoch(port, "no-such-topic", 0),
        UNKNOWN_TOPIC_OR_PARTITION,
    ),
    "OffsetCommit to a missing topic": (lambda port, t: _commit(port, "no-such-topic", 0), UNKNOWN_TOPIC_OR_PARTITION),
    "OffsetCommit to a missing partition": (lambda port, t: _commit(port, t, 9), UNKNOWN_TOPIC_OR_PARTITION),
    "DescribeConfigs of a missing topic": (
        lambda port, t: _describe_configs(port, "no-such-topic"),
        UNKNOWN_TOPIC_OR_PARTITION,
    ),
    "DeleteTopics of a missing topic": (
        lambda port, t: _delete_topic(port, "no-such-topic"),
        UNKNOWN_TOPIC_OR_PARTITION,
    ),
    "CreatePartitions of a missing topic": (
        lambda port, t: _create_partitions(port, "no-such-topic"),
        UNKNOWN_TOPIC_OR_PARTITION,
    ),
    "ElectLeaders of a missing topic": (lambda port, t: _elect(port, "no-such-topic"), UNKNOWN_TOPIC_OR_PARTITION),
    "Heartbeat of an unknown member": (lambda port, t: _heartbeat(port), UNKNOWN_MEMBER_ID),
    "DescribeGroups v6 of a missing group": (lambda port, t: _describe_group(port), GROUP_ID_NOT_FOUND),
    "DeleteGroups of a missing group": (lambda port, t: _delete_group(port), GROUP_ID_NOT_FOUND),
}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Any:
    b = BrokerProcess(tmp_path_factory.mktemp("unknown") / "data").start()
    topic = topic_name("known")
    create_topic(b.bootstrap, topic)
    deadline = time.monotonic() + 30  # groups need __consumer_offsets: ask until this node coordinates
    while _req(b.port, 10, 4, key_type=0, coordinator_keys=("g-none",)).coordinators[0].error_code:
        assert time.monotonic() < deadline, "no group coordinator"
        time.sleep(0.2)
    yield b, topic
    b.stop()


@pytest.mark.parametrize("case", sorted(CASES))
def test_unknown_things_get_kafkas_answer(node: tuple[BrokerProcess, str], case: str) -> None:
    b, topic = node
    call, expected = CASES[case]
    assert call(b.port, topic) == expected


def test_nothing_was_created_or_stored(node: tuple[BrokerProcess, str]) -> None:
    b, _topic = node
    m = schema_module(3, 12)
    md = _req(
        b.port,
        3,
        12,
        topics=(m.MetadataRequestTopic(topic_id=None, name="no-such-topic"),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    assert int(md.topics[0].error_code) == UNKNOWN_TOPIC_OR_PARTITION
    m = schema_module(9, 8)
    r = _req(b.port, 9, 8, groups=(m.OffsetFetchRequestGroup(group_id="g-unknown", topics=None),), require_stable=False)
    assert all(t.name != "no-such-topic" for t in r.groups[0].topics), "an offset was stored for a missing topic"
