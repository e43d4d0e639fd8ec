"""DeleteRecords on a real 3-broker cluster: every replica follows the leader's log start offset before the
answer, the start survives kill -9 of the leader, and the new leader answers ListOffsets earliest with it."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition

from epochlog.server.cluster.local import LocalCluster
from epochlog.storage import checkpoints
from epochlog.storage.log_manager import LOG_STARTS
from tests.integration.cluster_helpers import create_topic, leader_epoch, partition_info, wait_until
from tests.integration.helpers import produce
from tests.integration.test_delete_records import (
    confluent_delete,
    delete_records_wire,
    first_offset,
    rows,
    segment_bases,
    watermarks,
)

pytestmark = pytest.mark.timeout(240)

REQUEST_TIMED_OUT = 7


def broker_dir(lc: LocalCluster, b: int) -> Path:
    return lc.data_dir / f"broker-{b}"


def start_offsets(lc: LocalCluster, topic: str) -> dict[int, int]:
    """Each broker's checkpointed log start offset of the partition, as its file says now."""
    return {b: checkpoints.read_offsets(broker_dir(lc, b) / LOG_STARTS).get((topic, 0), -1) for b in lc.broker_ids()}


def test_delete_records_reaches_every_replica_and_survives_kill9_of_the_leader(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap
    topic = "purge"
    create_topic(bs, topic, 1, 3, {"segment.bytes": "3000", "min.insync.replicas": "2"})
    wait_until(lambda: partition_info(bs, topic)[2] == [1, 2, 3], 20, "a leader and a full ISR")
    leader0, replicas, _isr = partition_info(bs, topic)
    for i in range(0, 100, 5):
        produce(bs, topic, [b"v%03d" % j + b"x" * 200 for j in range(i, i + 5)], {"linger.ms": 0, "acks": "all"})

    # The answer waits until every live replica started at 37 (Kafka's DelayedDeleteRecords): at that
    # moment each broker's checkpoint already says so, and its segments wholly below 37 are gone.
    assert confluent_delete(bs, topic, 37) == 37
    assert start_offsets(cluster, topic) == {1: 37, 2: 37, 3: 37}
    for b in cluster.broker_ids():
        bases = segment_bases(broker_dir(cluster, b) / f"{topic}-0")
        assert bases[0] <= 37 and (len(bases) == 1 or bases[1] > 37), f"broker {b} keeps old segments: {bases}"
    assert first_offset(bs, topic) == 37

    # kill -9 of the leader: the new leader (a follower until now) answers ListOffsets earliest with 37.
    cluster.kill9(f"broker-{leader0}")
    wait_until(lambda: leader_epoch(bs, topic)[0] not in (-1, leader0), 15, "a new leader")
    wait_until(lambda: watermarks(bs, topic) == (37, 100), 15, "the new leader's watermarks")
    assert first_offset(bs, topic) == 37

    # The old leader comes back as a follower with its start from its own checkpoint; kafka-python's
    # DeleteRecords at the new leader is again answered once all three replicas moved.
    cluster.start_node(f"broker-{leader0}")
    wait_until(lambda: partition_info(bs, topic)[2] == [1, 2, 3], 30, "the ISR to be whole again")
    admin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=30000)
    try:
        out = admin.delete_records({KTopicPartition(topic, 0): 50}, timeout_ms=30000)
        (row,) = out.values()
        assert (row["error_code"], row["low_watermark"]) == (0, 50)
    finally:
        admin.close()
    assert start_offsets(cluster, topic) == {1: 50, 2: 50, 3: 50}

    # Leadership back to the restarted broker (the preferred replica): it answers with 50 too.
    assert replicas[0] == leader0, "the first leader is the preferred replica"
    elector = AdminClient({"bootstrap.servers": bs})
    # Per partition: None, or ELECTION_NOT_NEEDED if the automatic rebalance was quicker.
    elector.elect_leaders(_preferred(), [TopicPartition(topic, 0)]).result(30)
    wait_until(lambda: partition_info(bs, topic)[0] == leader0, 15, "the preferred leader back")
    wait_until(lambda: watermarks(bs, topic) == (50, 100), 15, "the restarted leader's watermarks")
    assert first_offset(bs, topic) == 50

    # A follower that stops fetching (SIGSTOP: still registered, not fenced before its 9 s session ends)
    # holds the answer back until the request's timeout: REQUEST_TIMED_OUT, with the low watermark reached.
    follower = next(b for b in cluster.broker_ids() if b != leader0)
    # Both followers must have fetched from the restarted leader first: until a follower fetches in the new
    # term its log start is unknown (-1, as in Kafka), and the low watermark answered would be -1. A
    # DeleteRecords at the current start is answered once they have (on a loaded machine that takes a moment).
    port0 = cluster.broker(leader0).port
    wait_until(
        lambda: rows(delete_records_wire(port0, [(topic, [(0, 50)])], timeout_ms=5000)) == {(topic, 0): (0, 50)},
        30,
        "both followers fetching from the restarted leader",
    )
    cluster.signal(f"broker-{follower}", signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        resp = delete_records_wire(cluster.broker(leader0).port, [(topic, [(0, 60)])], timeout_ms=1000)
        assert rows(resp) == {(topic, 0): (REQUEST_TIMED_OUT, 50)}
        assert 0.9 < time.monotonic() - t0 < 5
    finally:
        cluster.signal(f"broker-{follower}", signal.SIGCONT)
    wait_until(lambda: start_offsets(cluster, topic)[follower] == 60, 15, "the paused follower to follow")
    assert watermarks(bs, topic) == (60, 100)


def _preferred() -> object:
    from confluent_kafka import ElectionType

    return ElectionType.PREFERRED
