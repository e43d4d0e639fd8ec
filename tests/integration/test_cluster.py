"""Fault tests against a real cluster: one `epochlog controller` and three `epochlog broker` processes."""

from __future__ import annotations

import signal
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from epochlog.server.cluster.local import LocalCluster
from tests.integration.cluster_helpers import (
    AckingProducer,
    create_topic,
    dump_batches,
    leader_epoch,
    new_cluster,
    partition_info,
    wait_until,
)
from tests.integration.kafka_wire import WireClient, schema_module

pytestmark = pytest.mark.timeout(180)


def consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 30) -> dict[bytes, tuple[int, int]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"v-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    seen: dict[bytes, tuple[int, int]] = {}
    deadline = time.monotonic() + timeout
    try:
        while len(seen) < expected and time.monotonic() < deadline:
            for m in c.consume(1000, 0.5):
                if m.error() is None:
                    seen[m.value()] = (m.partition(), m.offset())
    finally:
        c.close()
    return seen


def assert_replicas_identical(lc: LocalCluster, topic: str, hw: int) -> int:
    """All replicas hold the same batches (offsets, epochs, CRCs) below the HW; returns the batch count."""
    dumps = {}
    for b in lc.broker_ids():
        rows = dump_batches(lc.data_dir / f"broker-{b}" / f"{topic}-0")
        dumps[b] = [
            (r["base_offset"], r["last_offset"], r["partition_leader_epoch"], r["crc"])
            for r in rows
            if r["last_offset"] < hw
        ]
    first = next(iter(dumps.values()))
    for b, rows in dumps.items():
        assert rows == first, f"broker {b} differs below the HW {hw}"
    return len(first)


def test_kill9_leader_under_acks_all_loses_nothing(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap
    topic = "orders"
    create_topic(bs, topic, 1, 3, {"min.insync.replicas": "2"})
    leader0, epoch0 = wait_until(lambda: leader_epoch(bs, topic), 10, "a leader")
    prod = AckingProducer(bs, topic).start()
    wait_until(lambda: len(prod.acked) > 2000, 20, "acknowledged writes before the kill")
    cluster.kill9(f"broker-{leader0}")
    wait_until(lambda: leader_epoch(bs, topic)[0] not in (-1, leader0), 10, "a new leader")
    before = len(prod.acked)
    wait_until(lambda: len(prod.acked) > before + 2000, 20, "writes acknowledged by the new leader")
    prod.stop()
    assert prod.errors == []
    leader1, epoch1 = leader_epoch(bs, topic)
    assert leader1 != leader0 and epoch1 > epoch0

    seen = consume_all(bs, topic, len(prod.acked))
    missing = {v: o for v, o in prod.acked.items() if seen.get(v) != o}
    assert not missing, f"{len(missing)} acknowledged records not found where acknowledged"

    # The killed broker comes back as a follower, catches up and rejoins the ISR.
    cluster.start_node(f"broker-{leader0}")
    wait_until(lambda: partition_info(bs, topic)[2] == [1, 2, 3], 30, "the ISR to be whole again")
    hw = max(o for _p, o in prod.acked.values()) + 1
    batches = assert_replicas_identical(cluster, topic, hw)
    assert batches > 0


def test_paused_follower_leaves_isr_and_rejoins(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap
    topic = "paused"
    create_topic(bs, topic, 1, 3, {"min.insync.replicas": "2"})
    leader, replicas, _isr = wait_until(lambda: partition_info(bs, topic), 10, "metadata")
    follower = next(r for r in replicas if r != leader)
    prod = AckingProducer(bs, topic, rate_sleep=0.01).start()
    try:
        wait_until(lambda: len(prod.acked) > 200, 20, "first writes")
        cluster.signal(f"broker-{follower}", signal.SIGSTOP)
        t0 = time.monotonic()
        wait_until(lambda: follower not in partition_info(bs, topic)[2], 20, "the paused follower to leave the ISR")
        assert time.monotonic() - t0 >= 2.0  # not before replica.lag.time.max.ms (3 s) less a tick
        n = len(prod.acked)
        wait_until(lambda: len(prod.acked) > n + 200, 20, "writes with two in sync")  # min ISR 2 still holds
        cluster.signal(f"broker-{follower}", signal.SIGCONT)
        wait_until(lambda: follower in partition_info(bs, topic)[2], 30, "the follower to rejoin the ISR")
    finally:
        cluster.signal(f"broker-{follower}", signal.SIGCONT)
        prod.stop()
    assert prod.errors == []


def _fetch(
    port: int, topic: str, current_epoch: int, last_fetched_epoch: int = -1, offset: int = 0, version: int = 12
) -> object:
    mod = schema_module(1, version)
    c = WireClient(port)
    # last_fetched_epoch is a v12 field
    diverging = {"last_fetched_epoch": last_fetched_epoch} if version >= 12 else {}
    try:
        resp = c.request(
            1,
            version,
            replica_id=-1,
            max_wait=timedelta(milliseconds=0),
            min_bytes=0,
            topics=(
                mod.FetchTopic(
                    topic=topic,
                    partitions=(
                        mod.FetchPartition(
                            partition=0,
                            current_leader_epoch=current_epoch,
                            fetch_offset=offset,
                            partition_max_bytes=1 << 20,
                            **diverging,
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
        )
    finally:
        c.close()
    return resp.responses[0].partitions[0]


def _fetch_v16_hints(port: int, topic: str, current_epoch: int) -> tuple[Any, Any]:
    """A Fetch v16 (by topic id): the partition's answer and the response's node endpoints."""
    meta = schema_module(3, 12)
    c = WireClient(port)
    try:
        md = c.request(
            3,
            12,
            topics=(meta.MetadataRequestTopic(topic_id=None, name=topic),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
        mod = schema_module(1, 16)
        part = mod.FetchPartition(
            partition=0,
            current_leader_epoch=current_epoch,
            fetch_offset=0,
            last_fetched_epoch=-1,
            partition_max_bytes=1 << 20,
        )
        resp = c.request(
            1,
            16,
            max_wait=timedelta(milliseconds=0),
            min_bytes=0,
            topics=(mod.FetchTopic(topic_id=md.topics[0].topic_id, partitions=(part,)),),
            forgotten_topics_data=(),
        )
    finally:
        c.close()
    return resp.responses[0].partitions[0], resp.node_endpoints


def test_stale_epoch_is_fenced_and_followers_are_refused(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap
    topic = "fenced"
    create_topic(bs, topic, 1, 3, {"min.insync.replicas": "2"})
    leader0, epoch0 = wait_until(lambda: leader_epoch(bs, topic), 10, "a leader")
    prod = AckingProducer(bs, topic).start()
    wait_until(lambda: len(prod.acked) > 100, 20, "writes")
    cluster.kill9(f"broker-{leader0}")
    leader1, epoch1 = wait_until(
        lambda: (lambda le: le if le[0] not in (-1, leader0) else None)(leader_epoch(bs, topic)), 10, "a new leader"
    )
    prod.stop()
    port = cluster.broker(leader1).port
    stale = _fetch(port, topic, epoch0)
    assert int(stale.error_code) == 74  # FENCED_LEADER_EPOCH
    ahead = _fetch(port, topic, epoch1 + 1)
    assert int(ahead.error_code) == 75  # UNKNOWN_LEADER_EPOCH
    ok = _fetch(port, topic, epoch1)
    assert int(ok.error_code) == 0 and ok.records
    # A follower answers a consumer's Fetch before v11 with NOT_LEADER_OR_FOLLOWER; from v11 (KIP-392, as
    # Kafka does whenever the request carries client metadata) it serves it, up to its own high watermark.
    follower = next(b for b in cluster.broker_ids() if b not in (leader0, leader1))
    fport = cluster.broker(follower).port
    assert int(_fetch(fport, topic, epoch1, version=10).error_code) == 6
    served = _fetch(fport, topic, epoch1)
    assert int(served.error_code) == 0 and int(served.high_watermark) <= int(ok.high_watermark)
    # A stale epoch is fenced there too, and from v16 the refusal names the leader and its endpoint (KIP-951).
    refused, nodes = _fetch_v16_hints(fport, topic, epoch0)
    assert int(refused.error_code) == 74
    assert (int(refused.current_leader.leader_id), int(refused.current_leader.leader_epoch)) == (leader1, epoch1)
    assert [(int(n.node_id), int(n.port)) for n in nodes] == [(leader1, port)]
    # A fetcher whose last fetched epoch ends before its position is told where to truncate.
    div = _fetch(port, topic, epoch1, last_fetched_epoch=epoch0, offset=10**9)
    assert int(div.error_code) == 0 and int(div.diverging_epoch.epoch) == epoch0
    assert int(div.diverging_epoch.end_offset) <= max(o for _p, o in prod.acked.values()) + 1


def test_controlled_shutdown_moves_leadership_first(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap
    topic = "bounce"
    create_topic(bs, topic, 1, 3, {"min.insync.replicas": "2"})
    leader0, epoch0 = wait_until(lambda: leader_epoch(bs, topic), 10, "a leader")
    prod = AckingProducer(bs, topic).start()
    try:
        wait_until(lambda: len(prod.acked) > 1000, 20, "writes")
        assert cluster.stop_node(f"broker-{leader0}") == 0
        log = (cluster.data_dir / "logs" / f"broker-{leader0}.log").read_text()
        assert "controlled shutdown took" in log
        leader1, epoch1 = wait_until(lambda: leader_epoch(bs, topic), 10, "the new leader")
        assert leader1 != leader0 and epoch1 > epoch0
        n = len(prod.acked)
        wait_until(lambda: len(prod.acked) > n + 1000, 20, "writes to the new leader")
        # Clean restart, then preferred-leader election moves leadership back (elect-leaders CLI).
        cluster.start_node(f"broker-{leader0}")
        wait_until(lambda: partition_info(bs, topic)[2] == [1, 2, 3], 30, "the ISR to be whole again")
    finally:
        prod.stop()
    assert prod.errors == []
    import subprocess
    import sys

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "epochlog.cli.main",
            "elect-leaders",
            "--bootstrap-server",
            bs.split(",")[0],
            "--topic",
            topic,
            "--partition",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "elected" in out.stdout
    leader2, epoch2 = leader_epoch(bs, topic)
    assert leader2 == partition_info(bs, topic)[1][0] and epoch2 > epoch1
    seen = consume_all(bs, topic, len(prod.acked))
    assert all(seen.get(v) == o for v, o in prod.acked.items())


def test_controller_bounce_keeps_the_cluster_serving(tmp_path: Path) -> None:
    cluster = new_cluster(tmp_path, 3, replica_lag_time_max_ms="3000", request_timeout_ms="6000").start()
    try:
        _controller_bounce(cluster)
    finally:
        cluster.stop()


def _controller_bounce(cluster: LocalCluster) -> None:
    bs = cluster.bootstrap
    topic = "ctrl"
    create_topic(bs, topic, 1, 3, {"min.insync.replicas": "2"})
    prod = AckingProducer(bs, topic).start()
    try:
        wait_until(lambda: len(prod.acked) > 500, 20, "writes")
        cluster.kill9("controller")
        n = len(prod.acked)
        # Leaders keep leading and the ISR keeps acknowledging without the controller.
        wait_until(lambda: len(prod.acked) > n + 500, 20, "writes while the controller is down")
        # An admin request the broker cannot forward is retried for request.timeout.ms (6 s here), then
        # answered REQUEST_TIMED_OUT, as Kafka answers it.
        admin = AdminClient({"bootstrap.servers": bs})
        t0 = time.monotonic()
        with pytest.raises(KafkaException) as failed:
            admin.create_topics([NewTopic("during-outage", 1, 3)], request_timeout=20)["during-outage"].result(30)
        assert failed.value.args[0].code() == KafkaError.REQUEST_TIMED_OUT, failed.value
        assert 5.5 < time.monotonic() - t0 < 20
        # A request forwarded while the controller comes back succeeds.
        pending = admin.create_topics([NewTopic("across-restart", 1, 3)], request_timeout=20)["across-restart"]
        cluster.start_node("controller")
        pending.result(30)
        wait_until(lambda: partition_info(bs, topic)[2] == [1, 2, 3], 30, "the brokers to re-register")
        # And the restarted controller still elects: kill the leader.
        leader, _e = leader_epoch(bs, topic)
        cluster.kill9(f"broker-{leader}")
        wait_until(lambda: leader_epoch(bs, topic)[0] not in (-1, leader), 15, "a new leader")
        n = len(prod.acked)
        wait_until(lambda: len(prod.acked) > n + 500, 20, "writes after the election")
    finally:
        prod.stop()
    assert prod.errors == []
    seen = consume_all(bs, topic, len(prod.acked))
    assert all(seen.get(v) == o for v, o in prod.acked.items())


def test_unclean_election_truncation_is_reported_by_clients(cluster: LocalCluster) -> None:
    """KIP-101's appendix on a real cluster: the out-of-sync follower wins an unclean election, the log
    grows back past the consumers' positions, and both kafka-python and librdkafka report truncation."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KPTopicPartition
    from kafka.errors import LogTruncationError

    from tests.integration.helpers import produce

    bs = cluster.bootstrap
    topic = "unclean"
    create_topic(bs, topic, 1, 2, {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})
    leader0, replicas, _ = wait_until(lambda: partition_info(bs, topic), 10, "metadata")
    follower = next(r for r in replicas if r != leader0)
    produce(bs, topic, [b"a-%d" % i for i in range(100)], {"acks": "all"})
    cluster.signal(f"broker-{follower}", signal.SIGSTOP)
    try:
        wait_until(lambda: partition_info(bs, topic)[2] == [leader0], 20, "the paused follower to leave the ISR")
        produce(bs, topic, [b"b-%d" % i for i in range(100)], {"acks": "all"})  # only the leader has these

        # Bootstrap only from brokers that answer: a client that picks the paused one waits out its timeout.
        awake = ",".join(f"127.0.0.1:{cluster.broker(b).port}" for b in cluster.broker_ids() if b != follower)
        kp = KafkaConsumer(
            bootstrap_servers=awake,
            auto_offset_reset="none",
            enable_auto_commit=False,
            request_timeout_ms=5000,
            metadata_max_age_ms=1000,
        )
        tp = KPTopicPartition(topic, 0)
        kp.assign([tp])
        kp.seek(tp, 0)
        got = 0
        deadline = time.monotonic() + 45  # a metadata request to the paused broker waits out request_timeout_ms
        while got < 200 and time.monotonic() < deadline:
            got += sum(len(v) for v in kp.poll(500).values())
        assert got == 200
        rd = Consumer(
            {
                "bootstrap.servers": awake,
                "group.id": "unclean-rd",
                "enable.auto.commit": False,
                "auto.offset.reset": "error",
                "topic.metadata.refresh.interval.ms": 1000,
            }
        )
        rd.assign([TopicPartition(topic, 0, 0)])
        n = 0
        deadline = time.monotonic() + 20
        while n < 200 and time.monotonic() < deadline:
            n += sum(1 for m in rd.consume(500, 0.5) if m.error() is None)
        assert n == 200

        cluster.kill9(f"broker-{leader0}")
    finally:
        cluster.signal(f"broker-{follower}", signal.SIGCONT)
    _leader, epoch1 = wait_until(
        lambda: (lambda le: le if le[0] == follower else None)(leader_epoch(bs, topic)), 30, "the unclean election"
    )
    assert epoch1 > 0
    # The log grows back past the consumers' positions (200): only epochs reveal the loss.
    produce(bs, topic, [b"c-%d" % i for i in range(150)], {"acks": "all"})

    truncation: LogTruncationError | None = None
    deadline = time.monotonic() + 30
    while truncation is None and time.monotonic() < deadline:
        try:
            kp.poll(500)
        except LogTruncationError as e:
            truncation = e
    kp.close()
    assert truncation is not None, "kafka-python did not report the truncation"
    divergent = next(iter(truncation.divergent_offsets.values()))
    assert divergent is not None and divergent.offset == 100

    reported = None
    deadline = time.monotonic() + 30
    while reported is None and time.monotonic() < deadline:
        for m in rd.consume(100, 0.5):
            if m.error() is not None:
                reported = m.error()
    rd.close()
    assert reported is not None, "librdkafka did not report the truncation"
    # RD_KAFKA_RESP_ERR__LOG_TRUNCATION (-140): "Partition log truncation detected at offset 200 ...
    # broker end offset is 100"
    assert reported.code() == -140, reported.str()
    assert "offset 200" in reported.str() and "end offset is 100" in reported.str(), reported.str()


def test_follower_and_controller_bounces_and_automatic_rebalance(tmp_path: Path) -> None:
    """Hard and clean bounces of a follower and a clean bounce of the controller under acks=all; then
    the controller moves leadership back to the preferred replica by itself (auto.leader.rebalance)."""
    lc = new_cluster(
        tmp_path,
        3,
        controller={"leader.imbalance.check.interval.seconds": "1", "leader.imbalance.per.broker.percentage": "0"},
        replica_lag_time_max_ms="3000",
    ).start()
    try:
        bs = lc.bootstrap
        topic = "bounces"
        create_topic(bs, topic, 1, 3, {"min.insync.replicas": "2"})
        leader0, replicas, _ = wait_until(lambda: partition_info(bs, topic), 10, "metadata")
        follower = next(r for r in replicas if r != leader0)
        prod = AckingProducer(bs, topic).start()
        try:
            for stop in ("kill -9", "clean"):
                n = len(prod.acked)
                wait_until(lambda n=n: len(prod.acked) > n + 500, 20, "writes")
                if stop == "kill -9":
                    lc.kill9(f"broker-{follower}")
                else:
                    assert lc.stop_node(f"broker-{follower}") == 0
                wait_until(lambda: follower not in partition_info(bs, topic)[2], 15, "the follower out of the ISR")
                n = len(prod.acked)
                wait_until(lambda n=n: len(prod.acked) > n + 500, 20, "writes with two in sync")
                lc.start_node(f"broker-{follower}")
                wait_until(lambda: partition_info(bs, topic)[2] == [1, 2, 3], 30, "the follower back in the ISR")
            assert lc.stop_node("controller") == 0
            n = len(prod.acked)
            wait_until(lambda n=n: len(prod.acked) > n + 500, 20, "writes without a controller")
            lc.start_node("controller")
            # The preferred leader (first replica) leaves; someone else leads; it returns and, with the
            # imbalance check every second, leads again without anyone asking.
            preferred = replicas[0]
            lc.kill9(f"broker-{preferred}")
            wait_until(lambda: leader_epoch(bs, topic)[0] not in (-1, preferred), 15, "a new leader")
            lc.start_node(f"broker-{preferred}")
            wait_until(lambda: partition_info(bs, topic)[0] == preferred, 30, "the automatic rebalance")
            n = len(prod.acked)
            wait_until(lambda n=n: len(prod.acked) > n + 500, 20, "writes after the rebalance")
        finally:
            prod.stop()
        assert prod.errors == []
        seen = consume_all(bs, topic, len(prod.acked))
        assert all(seen.get(v) == o for v, o in prod.acked.items())
        hw = max(o for _p, o in prod.acked.values()) + 1
        wait_until(lambda: assert_replicas_identical(lc, topic, hw) > 0, 20, "identical replicas")
    finally:
        lc.stop()


def _group_coordinator(bootstrap: str, group: str) -> int:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer is in
    return int(admin.describe_consumer_groups([group])[group].result(10).coordinator.id)


def test_committed_offsets_survive_kill9_of_the_group_coordinator(cluster: LocalCluster) -> None:
    """__consumer_offsets is replicated: a commit acknowledged by the coordinator is in the ISR, and the
    leader of the group's partition on another broker serves it after the coordinator dies."""
    from confluent_kafka import Producer

    bs = cluster.bootstrap
    topic, group = "events", "billing"
    create_topic(bs, topic, 1, 3, {"min.insync.replicas": "2"})
    p = Producer({"bootstrap.servers": bs, "acks": "all"})
    for i in range(100):
        p.produce(topic, f"e{i}".encode())
    assert p.flush(30) == 0

    # "latest": a group whose offsets were lost would silently skip to the end.
    conf = {"bootstrap.servers": bs, "group.id": group, "auto.offset.reset": "latest", "enable.auto.commit": False}
    c = Consumer(conf)
    c.assign([TopicPartition(topic, 0, 0)])
    got: list = []
    deadline = time.monotonic() + 30
    while len(got) < 40 and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got.append(m)
    c.commit(offsets=[TopicPartition(topic, 0, got[-1].offset() + 1)], asynchronous=False)
    c.close()
    assert got[-1].offset() == 39

    coordinator = wait_until(lambda: _group_coordinator(bs, group) + 1, 20, "a coordinator") - 1
    cluster.kill9(f"broker-{coordinator}")
    wait_until(lambda: _group_coordinator(bs, group) not in (coordinator, -1), 20, "a new coordinator")

    c = Consumer(conf)
    try:
        committed = wait_until(
            lambda: c.committed([TopicPartition(topic, 0)], timeout=5)[0].offset, 30, "the committed offset"
        )
        assert committed == 40
        c.subscribe([topic])
        first = wait_until(lambda: (m := c.poll(1.0)) is not None and m.error() is None and m, 30, "a record")
        assert first.offset() == 40
    finally:
        c.close()


def test_offsets_topic_waits_for_enough_live_brokers(tmp_path: Path) -> None:
    """As Kafka: __consumer_offsets is not created with fewer live brokers than
    offsets.topic.replication.factor (a commit waits), and gets its full factor once they are back."""
    lc = new_cluster(tmp_path, 3).start()
    try:
        bs = lc.bootstrap
        lc.kill9("broker-3")
        conf = {"bootstrap.servers": bs, "group.id": "early", "enable.auto.commit": False}
        c = Consumer(conf)
        try:
            with pytest.raises(Exception, match=r"COORDINATOR_NOT_AVAILABLE|Timed out|_TIMED_OUT"):
                c.committed([TopicPartition("t", 0)], timeout=4)
            from confluent_kafka.admin import AdminClient

            assert "__consumer_offsets" not in AdminClient({"bootstrap.servers": bs}).list_topics(timeout=5).topics
            lc.start_node("broker-3")
            committed = wait_until(
                lambda: c.committed([TopicPartition("t", 0)], timeout=5)[0], 60, "a coordinator after the restart"
            )
            assert committed.offset < 0  # nothing committed yet, but the group is served
        finally:
            c.close()
        _leader, replicas, _isr = partition_info(bs, "__consumer_offsets", 0)
        assert sorted(replicas) == [1, 2, 3]
    finally:
        lc.stop()


def test_create_topics_defaults_and_unknown_configs_in_a_cluster(tmp_path: Path) -> None:
    """Forwarded CreateTopics: an unknown config (once an internal key the controller parsed) is refused
    with INVALID_CONFIG, and the default partition count (-1) is the controller's num.partitions."""
    from confluent_kafka.admin import AdminClient, NewTopic

    lc = new_cluster(tmp_path, 1, controller={"num.partitions": "3"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": lc.bootstrap})
        bad = admin.create_topics([NewTopic("odd", 1, 1, config={"epochlog.default.partitions": "abc"})])["odd"]
        with pytest.raises(Exception, match=r"INVALID_CONFIG|unknown topic config"):
            bad.result(20)
        admin.create_topics([NewTopic("plain", -1, 1)])["plain"].result(20)
        md = admin.list_topics("plain", timeout=10)
        assert len(md.topics["plain"].partitions) == 3
    finally:
        lc.stop()


def test_a_follower_behind_the_leaders_log_start_starts_over_there_and_rejoins(tmp_path: Path) -> None:
    """A follower that was down while retention deleted what it lacked gets OFFSET_OUT_OF_RANGE, empties
    its log and starts at the leader's log start offset (Kafka's truncateFullyAndStartAt), catches up
    and rejoins the ISR, holding the leader's batches from there on."""
    from tests.integration.helpers import produce

    lc = new_cluster(tmp_path, 3, log_retention_check_interval_ms="300").start()
    try:
        bs = lc.bootstrap
        topic = "behind"
        cfg = {"segment.bytes": "20000", "retention.bytes": "40000", "min.insync.replicas": "1"}
        create_topic(bs, topic, 1, 3, cfg)
        leader, replicas, _ = wait_until(lambda: partition_info(bs, topic), 10, "metadata")
        lagger = next(r for r in replicas if r != leader)
        produce(bs, topic, [b"early-%d" % i for i in range(5)], {"acks": "all"})
        wait_until(lambda: sorted(partition_info(bs, topic)[2]) == [1, 2, 3], 20, "a full ISR")
        lc.kill9(f"broker-{lagger}")
        wait_until(lambda: lagger not in partition_info(bs, topic)[2], 20, "the dead follower out of the ISR")
        for i in range(30):
            produce(bs, topic, [b"x" * 1000 + b"%d-%d" % (i, j) for j in range(5)], {"acks": "all", "linger.ms": 0})
        c = Consumer({"bootstrap.servers": bs, "group.id": "behind"})
        try:
            low = wait_until(
                lambda: (lambda lo: lo if lo > 5 else None)(c.get_watermark_offsets(TopicPartition(topic, 0))[0]),
                20,
                "retention to pass the lagging follower's log end",
            )
        finally:
            c.close()
        lc.start_node(f"broker-{lagger}")
        wait_until(lambda: sorted(partition_info(bs, topic)[2]) == [1, 2, 3], 40, "the follower back in the ISR")
        log_text = lc.nodes[f"broker-{lagger}"].log.read_text()
        assert "behind the leader's log start" in log_text
        mine = dump_batches(lc.data_dir / f"broker-{lagger}" / f"{topic}-0")
        theirs = dump_batches(lc.data_dir / f"broker-{leader}" / f"{topic}-0")
        assert mine and mine[0]["base_offset"] >= low
        keys = ("base_offset", "last_offset", "partition_leader_epoch", "crc")
        start = mine[0]["base_offset"]
        assert [tuple(r[k] for k in keys) for r in mine] == [
            tuple(r[k] for k in keys) for r in theirs if r["base_offset"] >= start
        ][: len(mine)]
        assert mine[-1]["last_offset"] == 154
    finally:
        lc.stop()
