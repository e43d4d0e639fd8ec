"""KIP-966 on a real cluster (one controller, four broker processes; the topic on brokers 1-3, broker 4
answers the describes): the ISR shrinks below min.insync.replicas and the replica that left shows as
eligible through DescribeTopicPartitions (our client, and `epochlog topics describe`); the last ISR member
is killed (-9, no clean-shutdown marker) and, back, is not eligible; the eligible replica, started again,
is elected from the ELR and every acknowledged record is still there."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from epochlog.client import topic_partitions as tp
from tests.integration.cluster_helpers import new_cluster, wait_until

pytestmark = pytest.mark.timeout(240)

TOPIC = "elr"


def describe_cli(bootstrap: str) -> list[str]:
    r = subprocess.run(
        [sys.executable, "-m", "epochlog.cli.main", "topics", "describe", TOPIC, "-b", bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


def partition(port: int) -> tp.PartitionRow:
    rows = tp.describe("127.0.0.1", port, [TOPIC])
    assert rows is not None and rows[0].error_code == 0
    return rows[0].partitions[0]


def produce(bootstrap: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 1})
    failed: list[object] = []
    for v in values:
        p.produce(TOPIC, v, partition=0, on_delivery=lambda err, _m: failed.append(err) if err else None)
    assert p.flush(30) == 0 and not failed, failed


def consume(bootstrap: str, want: int) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"elr-{uuid.uuid4().hex[:6]}"})
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got: list[bytes] = []
    try:
        wait_until(
            lambda: got.extend(m.value() for m in c.consume(500, 0.5) if not m.error()) or len(got) >= want,
            60,
            f"{want} records",
        )
    finally:
        c.close()
    return got


def test_isr_below_min_isr_shows_elr_and_an_election_from_it(tmp_path: Path) -> None:
    lc = new_cluster(tmp_path, brokers=4)
    lc.start()
    try:
        port4 = lc.broker(4).port
        admin = AdminClient({"bootstrap.servers": lc.bootstrap})
        new = NewTopic(TOPIC, num_partitions=1, replica_assignment=[[1, 2, 3]], config={"min.insync.replicas": "2"})
        admin.create_topics([new])[TOPIC].result(15)
        wait_until(lambda: sorted(partition(port4).isr) == [1, 2, 3], 30, "the ISR of three")
        assert partition(port4).elr == [] and partition(port4).last_known_elr == []
        acked = [b"v%d" % i for i in range(200)]
        produce(lc.bootstrap, acked)

        lc.stop_node("broker-3")  # clean: ISR {1, 2} is still at min ISR, nothing eligible beyond it
        wait_until(lambda: sorted(partition(port4).isr) == [1, 2], 30, "broker 3 out of the ISR")
        assert partition(port4).elr == []
        lc.stop_node("broker-2")  # the ISR falls below min ISR: 2 holds every committed record
        p = wait_until(lambda: (q := partition(port4)).isr == [1] and q, 30, "broker 2 out of the ISR")
        assert p.leader == 1 and p.elr == [2] and p.last_known_elr == []
        lines = describe_cli(f"127.0.0.1:{port4}")
        assert lines[0].startswith(f"Topic: {TOPIC}\tTopicId: ") and "min.insync.replicas=2" in lines[0], lines
        assert lines[1] == f"\tTopic: {TOPIC}\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1\tElr: 2\tLastKnownElr: "

        lc.kill9("broker-1")  # the last ISR member dies without a clean-shutdown marker
        p = wait_until(lambda: (q := partition(port4)).leader == -1 and q, 30, "no leader")
        assert p.isr == [] and p.elr == [1, 2]
        lc.start_node("broker-1")  # back after an unclean shutdown: no longer eligible
        p = wait_until(lambda: (q := partition(port4)).elr == [2] and q, 30, "broker 1 out of the ELR")
        assert p.leader == -1 and p.isr == [] and p.last_known_elr == [1]
        line = describe_cli(f"127.0.0.1:{port4}")[1]
        assert line == f"\tTopic: {TOPIC}\tPartition: 0\tLeader: none\tReplicas: 1,2,3\tIsr: \tElr: 2\tLastKnownElr: 1"

        lc.start_node("broker-2")  # clean marker, epoch as on record: elected from the ELR
        p = wait_until(lambda: (q := partition(port4)).leader == 2 and q, 30, "broker 2 elected")
        assert 2 in p.isr
        lc.start_node("broker-3")
        wait_until(lambda: sorted(partition(port4).isr) == [1, 2, 3], 60, "every replica back in the ISR")
        p = partition(port4)
        assert p.elr == [] and p.last_known_elr == []  # at min ISR again: both lists cleared
        got = consume(lc.bootstrap, len(acked))
        assert got[: len(acked)] == acked
    finally:
        lc.stop()
