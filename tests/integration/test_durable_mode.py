"""flush.messages=1 (Kafka's log.flush.interval.messages=1), the durable mode, with real brokers and
confluent-kafka: every acknowledgement (acks=1 and acks=all) waits for a sync of the records it covers, and
concurrent produces share their syncs (group commit). The end-to-end power-loss run (every broker's unsynced
pages dropped at once) is built on the FUSE filesystem of the chaos command; here the mode's plumbing is
shown on real processes, and the rule itself in tests/unit/replication/test_durability.py and the simulator."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.broker_process import free_port
from tests.integration.cluster_helpers import AckingProducer, create_topic, new_cluster, wait_until
from tests.integration.helpers import consume_assign, topic_name
from tests.integration.test_metrics import scrape

pytestmark = pytest.mark.timeout(240)

FLUSHES = "kafka_log_logflushstats_logflushrateandtimems_count"


def _produce_concurrently(bootstrap: str, topic: str, producers: int, each: int, acks: str) -> list[bytes]:
    acked: list[bytes] = []
    errors: list[object] = []
    lock = threading.Lock()

    def run(n: int) -> None:
        p = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, "batch.num.messages": 10})

        def cb(err: object, msg: object) -> None:
            with lock:
                if err is not None:
                    errors.append(err)
                else:
                    acked.append(msg.value())  # type: ignore[attr-defined]

        for i in range(each):
            p.produce(topic, value=b"p%d-%06d" % (n, i), on_delivery=cb)
            p.poll(0)
        assert p.flush(60) == 0

    threads = [threading.Thread(target=run, args=(n,)) for n in range(producers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not errors, errors[:3]
    return acked


def test_single_node_durable_mode_acks_after_shared_syncs(broker_factory) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    b = broker_factory({"metrics.port": str(port), "log.flush.interval.messages": "1"})
    topic = topic_name("durable")
    create_topic(b.bootstrap, topic, 1, 1, {})
    before = scrape(port)
    acked = _produce_concurrently(b.bootstrap, topic, producers=4, each=1500, acks="all")
    acked += _produce_concurrently(b.bootstrap, topic, producers=2, each=500, acks="1")
    after = scrape(port)
    assert len(acked) == 7000
    requests = sum(
        after[k] - before.get(k, 0)
        for k in after
        if k.startswith('kafka_network_requestmetrics_requests_total{request="Produce"')
    )
    syncs = after[FLUSHES] - before[FLUSHES]
    # Every produce was covered by a sync, and concurrent ones shared theirs.
    assert 0 < syncs < requests, (syncs, requests)
    values = {m.value() for m in consume_assign(b.bootstrap, topic, 0, len(acked), timeout=30)}
    assert values == set(acked)


def test_rf3_cluster_durable_mode_keeps_every_ack_across_kill_of_all_brokers(tmp_path: Path) -> None:
    lc = new_cluster(tmp_path, 3, log_flush_interval_messages="1").start()
    try:
        bs = lc.bootstrap
        topic = "durable3"
        create_topic(bs, topic, 1, 3, {"min.insync.replicas": "2"})
        prod = AckingProducer(bs, topic).start()
        wait_until(lambda: len(prod.acked) > 1500, 60, "acknowledged writes")
        prod.stop()
        assert not prod.errors, prod.errors[:3]
        for i in lc.broker_ids():
            lc.kill9(f"broker-{i}")
        for i in lc.broker_ids():
            lc.start_node(f"broker-{i}")
        got = {m.value(): m.offset() for m in consume_assign(bs, topic, 0, len(prod.acked), timeout=60)}
        lost = [v for v in prod.acked if v not in got]
        assert not lost, f"{len(lost)} acknowledged records lost"
        assert all(got[v] == o for v, (_p, o) in prod.acked.items())
    finally:
        lc.stop()
