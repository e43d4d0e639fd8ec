"""An idempotent batch that was appended but not acknowledged must be deduplicated when it is sent again.

The duplicates seen with confluent-kafka under partitions came from librdkafka renumbering unacknowledged
batches under a bumped producer epoch (it bumps on OUT_OF_ORDER_SEQUENCE_NUMBER for a batch that is not the
first in flight, librdkafka issue #4953); a batch re-sent under its own epoch and sequence is the broker's
to deduplicate. This test drives that retry on the wire, through the answers Kafka gives on the way:
NOT_ENOUGH_REPLICAS_AFTER_APPEND (or REQUEST_TIMED_OUT) for the append the ISR shrank under, then
NOT_ENOUGH_REPLICAS while the ISR is below min.insync.replicas (Kafka checks it before the sequence), then,
with the ISR whole again, the duplicate answered with the offset of the first copy and nothing appended.
"""

from __future__ import annotations

import datetime
import signal
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from epochlog.protocol.errors import Err
from epochlog.protocol.records import build_batch
from epochlog.server.cluster.local import LocalCluster
from tests.integration.cluster_helpers import create_topic, partition_info, wait_until
from tests.integration.kafka_wire import WireClient, schema_module

pytestmark = pytest.mark.integration

PID, EPOCH = 4242, 3


def _produce(port: int, topic: str, batch: bytes, timeout_s: float = 10) -> Any:
    m = schema_module(0, 9)
    wire = WireClient(port)
    wire.sock.settimeout(timeout_s + 10)
    try:
        resp = wire.request(
            0,
            9,
            transactional_id=None,
            acks=-1,
            timeout=datetime.timedelta(seconds=timeout_s),
            topic_data=(
                m.TopicProduceData(name=topic, partition_data=(m.PartitionProduceData(index=0, records=batch),)),
            ),
        )
    finally:
        wire.close()
    return resp.responses[0].partition_responses[0]


def _values(bootstrap: str, topic: str, end: int) -> list[tuple[int, bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "dupes", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[int, bytes]] = []

        def read_all() -> bool:
            for m in c.consume(100, 0.5):
                if m.error() is None:
                    out.append((m.offset(), m.value()))
            return bool(out) and out[-1][0] >= end - 1

        wait_until(read_all, 30, f"the partition read to offset {end}")
        return out
    finally:
        c.close()


def test_a_persisted_batch_resent_under_its_epoch_is_answered_as_a_duplicate(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap
    topic = "dedup"
    create_topic(bs, topic, 1, 3, {"min.insync.replicas": "2"})
    leader, replicas, _isr = wait_until(lambda: partition_info(bs, topic), 15, "a leader")
    port = cluster.broker(leader).port
    first = build_batch([(None, b"first")], producer_id=PID, producer_epoch=EPOCH, base_sequence=0)
    assert _produce(port, topic, first).error_code == Err.NONE
    batch = build_batch([(None, b"v%d" % i) for i in range(5)], producer_id=PID, producer_epoch=EPOCH, base_sequence=1)
    followers = [r for r in replicas if r != leader]
    try:
        for f in followers:
            cluster.signal(f"broker-{f}", signal.SIGSTOP)
        # Appended at once, then the ISR shrinks to the leader under it (replica.lag.time.max.ms = 3 s).
        row = _produce(port, topic, batch, timeout_s=20)
        assert row.error_code in (Err.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Err.REQUEST_TIMED_OUT), row
        wait_until(lambda: partition_info(bs, topic)[2] == [leader], 20, "the ISR to be the leader alone")
        # The client retries the same batch: Kafka refuses it on min.insync.replicas before looking at it.
        assert _produce(port, topic, batch).error_code == Err.NOT_ENOUGH_REPLICAS
    finally:
        for f in followers:
            cluster.signal(f"broker-{f}", signal.SIGCONT)
    wait_until(lambda: len(partition_info(bs, topic)[2]) >= 2, 30, "the followers back in the ISR")
    # Retried as a client does while the leader's own ISR may still lag the metadata: NOT_ENOUGH_REPLICAS
    # is retriable; what comes after it is the answer.
    again = wait_until(
        lambda: (r := _produce(port, topic, batch)).error_code != Err.NOT_ENOUGH_REPLICAS and r, 30, "an answer"
    )
    assert again.error_code == Err.NONE, again
    assert int(again.base_offset) == 1, "the duplicate is answered with the first copy's offset"
    # Once more with the ISR whole: still the same offset, and the log holds each record once.
    assert int(_produce(port, topic, batch).base_offset) == 1
    values = [v for _o, v in _values(bs, topic, 6)]
    assert values == [b"first", b"v0", b"v1", b"v2", b"v3", b"v4"]
    # A new epoch starting at sequence 0 is a new batch (Kafka's rule): this is what a client that renumbers
    # an unacknowledged batch under a bumped epoch gets, and why it must not renumber a persisted one.
    bumped = build_batch([(None, b"v0")], producer_id=PID, producer_epoch=EPOCH + 1, base_sequence=0)
    assert _produce(port, topic, bumped).base_offset == 6
    # A new epoch not starting at 0 is out of order (the answer that makes librdkafka bump again).
    gap = build_batch([(None, b"x")], producer_id=PID, producer_epoch=EPOCH + 2, base_sequence=5)
    assert _produce(port, topic, gap).error_code == Err.OUT_OF_ORDER_SEQUENCE_NUMBER
