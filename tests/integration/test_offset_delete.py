"""OffsetDelete (KIP-496) against a real `epochlog up` with kafka-python's admin delete_group_offsets
(confluent-kafka 2.16's Python AdminClient does not expose it) and a real consumer group."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition
from kafka.errors import GroupIdNotFoundError, GroupSubscribedToTopicError, NoError, UnknownTopicOrPartitionError

from tests.broker_process import BrokerProcess
from tests.integration.helpers import create_topic, produce, topic_name

pytestmark = pytest.mark.timeout(120)


def committed(admin: KafkaAdminClient, group: str) -> dict[tuple[str, int], int]:
    return {(tp.topic, tp.partition): om.offset for tp, om in admin.list_group_offsets(group)[group].items()}


def test_offset_delete_with_kafka_python(broker_factory: Any) -> None:
    b: BrokerProcess = broker_factory()
    subscribed, other = topic_name("od"), topic_name("odother")
    create_topic(b.bootstrap, subscribed)
    create_topic(b.bootstrap, other)
    produce(b.bootstrap, subscribed, [b"a", b"b", b"c"], {"linger.ms": 0})
    group = topic_name("group")
    c = Consumer(
        {
            "bootstrap.servers": b.bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=20000)
    try:
        c.subscribe([subscribed])
        got = 0
        deadline = time.monotonic() + 30
        while got < 3 and time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is not None and m.error() is None:
                got += 1
        assert got == 3
        # The member commits for its topic and, by hand, for a topic it does not subscribe to.
        c.commit(offsets=[TopicPartition(subscribed, 0, 3), TopicPartition(other, 0, 9)], asynchronous=False)
        assert committed(admin, group) == {(subscribed, 0): 3, (other, 0): 9}

        # Stable and subscribed: that offset stays; the other topic's goes; an unknown topic is named as such.
        out = admin.delete_group_offsets(
            group, [KTopicPartition(subscribed, 0), KTopicPartition(other, 0), KTopicPartition("no-such-topic", 0)]
        )
        assert out == {
            KTopicPartition(subscribed, 0): GroupSubscribedToTopicError,
            KTopicPartition(other, 0): NoError,
            KTopicPartition("no-such-topic", 0): UnknownTopicOrPartitionError,
        }
        assert committed(admin, group) == {(subscribed, 0): 3}

        # Once the group is empty, the subscribed topic's offset can go too.
        c.close()
        out = admin.delete_group_offsets(group, [KTopicPartition(subscribed, 0)])
        assert out == {KTopicPartition(subscribed, 0): NoError}
        assert committed(admin, group) == {}

        with pytest.raises(GroupIdNotFoundError):
            admin.delete_group_offsets("no-such-group", [KTopicPartition(subscribed, 0)])
    finally:
        admin.close()

    # The deletion is a tombstone in __consumer_offsets: a kill -9 and restart does not bring it back.
    b.kill9()
    b.start()
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=20000)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                assert committed(admin, group) == {}
                break
            except AssertionError:
                raise
            except Exception:  # the coordinator may still be loading right after the start
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
    finally:
        admin.close()
