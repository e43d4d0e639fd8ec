"""The Prometheus endpoints tell the truth: every gauge and counter here is read, the state it describes
is changed on real processes, and the value is seen to move (Kafka's names, as jmx_exporter spells them)."""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker_process import free_port
from tests.integration.cluster_helpers import new_cluster
from tests.integration.helpers import consume_assign, produce, topic_name

pytestmark = pytest.mark.timeout(240)


def scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z_]+(?:\{[^}]*\})?) ([-0-9.e+]+)$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def wait_for(port: int, name: str, pred: Callable[[float], bool], timeout: float = 30) -> float:
    deadline = time.monotonic() + timeout
    value = float("nan")
    while time.monotonic() < deadline:
        value = scrape(port).get(name, float("nan"))
        if pred(value):
            return value
        time.sleep(0.2)
    raise AssertionError(f"{name} stayed at {value} for {timeout} s")


def test_single_node_counts_requests_flushes_and_leaders(broker_factory) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    b = broker_factory({"metrics.port": str(port), "log.flush.interval.messages": "1"})
    before = scrape(port)
    assert before["kafka_controller_kafkacontroller_activecontrollercount"] == 1  # a combined node is its controller
    topic = topic_name("met")
    produce(b.bootstrap, topic, [b"x" * 10] * 7)
    consume_assign(b.bootstrap, topic, 0, 7)
    after = scrape(port)
    assert after[f'kafka_server_brokertopicmetrics_messagesin_total{{topic="{topic}"}}'] == 7
    produced = [k for k in after if k.startswith('kafka_network_requestmetrics_requests_total{request="Produce"')]
    assert produced and sum(after[k] for k in produced) >= 1
    assert after['kafka_network_requestmetrics_totaltimems_count{request="Fetch"}'] > before.get(
        'kafka_network_requestmetrics_totaltimems_count{request="Fetch"}', 0
    )
    assert (
        after["kafka_log_logflushstats_logflushrateandtimems_count"]
        > before["kafka_log_logflushstats_logflushrateandtimems_count"]
    )
    # The new topic's partition (and __consumer_offsets' 50, if the consumer's group created them meanwhile).
    assert after["kafka_server_replicamanager_leadercount"] >= before["kafka_server_replicamanager_leadercount"] + 1
    assert after["kafka_server_replicamanager_partitioncount"] >= 1


def test_cluster_metrics_follow_failures(tmp_path: Path) -> None:
    lc = new_cluster(tmp_path, 3, replica_lag_time_max_ms="2000")
    ports = {name: free_port() for name in lc.nodes}
    for name, node in lc.nodes.items():
        with open(node.config, "a") as f:
            f.write(f"metrics.port={ports[name]}\n")
    lc.start()
    try:
        ctrl = ports["controller"]
        assert scrape(ctrl)["kafka_controller_kafkacontroller_activecontrollercount"] == 1
        admin = AdminClient({"bootstrap.servers": lc.bootstrap})
        shared, single = topic_name("rf3"), topic_name("rf1")
        admin.create_topics([NewTopic(shared, 1, 3, config={"min.insync.replicas": "2"}), NewTopic(single, 1, 1)])[
            shared
        ].result(20)
        p = Producer({"bootstrap.servers": lc.bootstrap, "acks": "all"})
        p.produce(shared, b"x")
        p.produce(single, b"y")
        assert p.flush(30) == 0
        md = admin.list_topics(timeout=10)
        leader = md.topics[shared].partitions[0].leader
        lone = md.topics[single].partitions[0].leader
        lport = ports[f"broker-{leader}"]
        base = scrape(lport)
        assert base["kafka_server_replicamanager_underreplicatedpartitions"] == 0
        at_min0 = base["kafka_server_replicamanager_atminisrpartitioncount"]  # RF=1 topics sit at min ISR
        followers = [b for b in lc.broker_ids() if b not in (leader,)]
        victim = next(b for b in followers if b != lone) if lone != leader else followers[0]
        elections0 = scrape(ctrl)["kafka_controller_controllerstats_leaderelectionrateandtimems_total"]

        lc.kill9(f"broker-{victim}")
        wait_for(lport, "kafka_server_replicamanager_underreplicatedpartitions", lambda v: v >= 1)
        wait_for(lport, "kafka_server_replicamanager_atminisrpartitioncount", lambda v: v >= at_min0 + 1)
        assert (
            scrape(lport)["kafka_server_replicamanager_isrshrinks_total"]
            > base["kafka_server_replicamanager_isrshrinks_total"]
        )
        if lone == victim:  # the RF=1 partition lived there: offline until it comes back
            wait_for(ctrl, "kafka_controller_kafkacontroller_offlinepartitionscount", lambda v: v >= 1)

        lc.start_node(f"broker-{victim}")
        wait_for(lport, "kafka_server_replicamanager_underreplicatedpartitions", lambda v: v == 0, timeout=60)
        assert (
            scrape(lport)["kafka_server_replicamanager_isrexpands_total"]
            > base["kafka_server_replicamanager_isrexpands_total"]
        )
        wait_for(ctrl, "kafka_controller_kafkacontroller_offlinepartitionscount", lambda v: v == 0)

        # Both followers of the min.insync.replicas=2 partition die: its ISR falls below the minimum.
        under0 = scrape(lport)["kafka_server_replicamanager_underminisrpartitioncount"]
        for b in followers:
            lc.kill9(f"broker-{b}")
        wait_for(lport, "kafka_server_replicamanager_underminisrpartitioncount", lambda v: v >= under0 + 1)
        for b in followers:
            lc.start_node(f"broker-{b}")
        wait_for(lport, "kafka_server_replicamanager_underminisrpartitioncount", lambda v: v == under0, timeout=60)
        wait_for(ctrl, "kafka_controller_kafkacontroller_offlinepartitionscount", lambda v: v == 0, timeout=60)

        # The RF=1 partition's broker dies: offline on the controller, and it leads one partition less.
        lone_port = ports[f"broker-{lone}"]
        led = scrape(lone_port)["kafka_server_replicamanager_leadercount"]
        assert led >= 1
        lc.kill9(f"broker-{lone}")
        wait_for(ctrl, "kafka_controller_kafkacontroller_offlinepartitionscount", lambda v: v >= 1)
        # Counted once the decision is durable, a moment after the gauge (which reads the live image) moved.
        wait_for(ctrl, "kafka_controller_controllerstats_leaderelectionrateandtimems_total", lambda v: v > elections0)
        lc.start_node(f"broker-{lone}")
        wait_for(ctrl, "kafka_controller_kafkacontroller_offlinepartitionscount", lambda v: v == 0, timeout=60)
        wait_for(lone_port, "kafka_server_replicamanager_leadercount", lambda v: v >= 1, timeout=60)
    finally:
        lc.stop()
