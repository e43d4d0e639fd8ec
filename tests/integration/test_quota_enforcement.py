"""Client quotas enforced on one `epochlog up` node: a confluent-kafka producer and consumer held to their
byte-rate quotas within 20% while unthrottled client ids beside them are not, the throttle time the clients
report (librdkafka's statistics, kafka-python's metrics), and a quota changed while a producer runs.

Rates are measured where they cannot be miscounted: a producer's by the log end offsets of a topic of its own
(what the broker accepted), a consumer's by the bytes it was handed. Every span starts after a warm-up: a
rate is counted over at least quota.window.num - 1 windows, so the first windows' worth of quota goes
through unthrottled (as in Kafka). The windows are Kafka's smallest size (1 s, quota.window.size.seconds is
at least 1) and 5 of them, to keep the warm-up short."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaProducer

from tests.broker_process import BrokerProcess
from tests.integration.helpers import create_topic, produce, topic_name
from tests.integration.quota_load import PAYLOAD, WARMUP, WINDOWS, ProducerLoad, end_offset
from tests.integration.test_client_quotas import alter

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

SPAN = 20.0
QUOTA = 256 * 1024  # bytes per second: far below what one client reaches on this machine


def _set(broker: BrokerProcess, entity: dict[str, str | None], key: str, value: float | None) -> None:
    resp = alter(broker.port, (entity, {key: value}))
    assert int(resp.entries[0].error_code) == 0


def _accepted_rate(bootstrap: str, topic: str, seconds: float) -> float:
    """Payload bytes per second the broker appended to ``topic`` over the next ``seconds``."""
    t0, o0 = time.monotonic(), end_offset(bootstrap, topic)
    deadline = t0 + seconds
    while time.monotonic() < deadline:
        time.sleep(0.2)
    t1, o1 = time.monotonic(), end_offset(bootstrap, topic)
    return (o1 - o0) * PAYLOAD / (t1 - t0)


def _wait_for(cond: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


@pytest.mark.long  # 30 s each: the default run keeps kafka-python's throttle check and the core's properties
def test_a_producer_is_held_to_its_quota_and_a_neighbour_is_not(broker_factory: Any) -> None:
    broker = broker_factory(WINDOWS)
    slow_topic, fast_topic = topic_name("quota-slow"), topic_name("quota-fast")
    create_topic(broker.bootstrap, slow_topic)
    create_topic(broker.bootstrap, fast_topic)
    _set(broker, {"client-id": "slow"}, "producer_byte_rate", float(QUOTA))
    slow = ProducerLoad(broker.bootstrap, slow_topic, "slow")
    fast = ProducerLoad(broker.bootstrap, fast_topic, "fast", pace=4 * QUOTA)  # paced: it only needs to beat the quota
    slow.start()
    fast.start()
    try:
        time.sleep(WARMUP)  # load, not synchronization: the quota's windows fill
        t0 = time.monotonic()
        o_slow, o_fast = end_offset(broker.bootstrap, slow_topic), end_offset(broker.bootstrap, fast_topic)
        while time.monotonic() - t0 < SPAN:
            time.sleep(0.2)
        t1 = time.monotonic()
        slow_rate = (end_offset(broker.bootstrap, slow_topic) - o_slow) * PAYLOAD / (t1 - t0)
        fast_rate = (end_offset(broker.bootstrap, fast_topic) - o_fast) * PAYLOAD / (t1 - t0)
        assert _wait_for(lambda: slow.throttle_max > 0, 5), "librdkafka reported no throttle"
    finally:
        slow.finish()
        fast.finish()
    info = {"slow": slow_rate, "fast": fast_rate, "throttle": slow.throttle_max, "errors": slow.errors}
    print("producer", info)
    # The quota counts the request's bytes, the offsets only payload: batch overhead is a few percent.
    assert slow_rate == pytest.approx(QUOTA, rel=0.2), info
    assert fast_rate > 2.5 * QUOTA, info
    assert fast.throttle_max == 0, info


@pytest.mark.long  # 30 s each: the default run keeps kafka-python's throttle check and the core's properties
def test_a_consumer_is_held_to_its_quota_and_a_neighbour_is_not(broker_factory: Any) -> None:
    broker = broker_factory(WINDOWS)
    topic = topic_name("quota-fetch")
    create_topic(broker.bootstrap, topic)
    total = int(QUOTA * (WARMUP + SPAN + 8))
    produce(broker.bootstrap, topic, [b"y" * PAYLOAD] * (total // PAYLOAD), {"batch.size": 32768})
    _set(broker, {"client-id": "reader"}, "consumer_byte_rate", float(QUOTA))
    throttles: list[int] = []

    def stats(raw: str) -> None:
        for b in json.loads(raw).get("brokers", {}).values():
            throttles.append(int(b.get("throttle", {}).get("max", 0)))

    def consumer(client_id: str, cb: Any = None) -> Consumer:
        conf = {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"g-{client_id}",
            "client.id": client_id,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            # A small prefetch queue: what the application is handed follows what the broker sent.
            "queued.max.messages.kbytes": 1024,
            "fetch.queue.backoff.ms": 10,
            "max.partition.fetch.bytes": 65536,
            "statistics.interval.ms": 500,
        }
        if cb is not None:
            conf["stats_cb"] = cb
        c = Consumer(conf)
        c.assign([TopicPartition(topic, 0, 0)])
        return c

    def drain(c: Consumer, until: float, stamps: list[tuple[float, int]]) -> None:
        while time.monotonic() < until:
            for m in c.consume(500, 0.2):
                if m.error() is None:
                    stamps.append((time.monotonic(), len(m.value() or b"")))

    # The neighbour first, alone: it reads the whole topic at whatever pace the machine allows.
    fast = consumer("unlimited")
    got: list[tuple[float, int]] = []
    t_fast = time.monotonic()
    while sum(n for _, n in got) < total and time.monotonic() - t_fast < 60:
        drain(fast, time.monotonic() + 1, got)
    fast.close()
    fast_rate = sum(n for _, n in got) / max(got[-1][0] - t_fast, 0.001)

    slow = consumer("reader", stats)
    stamps: list[tuple[float, int]] = []
    start = time.monotonic()
    drain(slow, start + WARMUP + SPAN, stamps)
    slow.poll(0.6)  # one more statistics interval
    slow.close()
    in_span = sum(n for t, n in stamps if t >= start + WARMUP)
    slow_rate = in_span / SPAN
    info = {"slow": slow_rate, "fast": fast_rate, "throttle": max(throttles, default=0)}
    print("consumer", info)
    assert slow_rate == pytest.approx(QUOTA, rel=0.2), info
    assert fast_rate > 2.5 * QUOTA, info
    assert max(throttles, default=0) > 0, info


def test_kafka_python_reports_the_throttle_time(broker_factory: Any) -> None:
    broker = broker_factory(WINDOWS)
    topic = topic_name("quota-kp")
    create_topic(broker.bootstrap, topic)
    _set(broker, {"client-id": "kp"}, "producer_byte_rate", 64 * 1024.0)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, client_id="kp", linger_ms=5)
    try:

        def throttle_max() -> float:
            values = [
                v
                for group in p.metrics().values()
                for name, v in group.items()
                if "throttle-time-max" in name and isinstance(v, (int, float))
            ]
            return max(values, default=0.0)

        deadline = time.monotonic() + 30
        while throttle_max() <= 0 and time.monotonic() < deadline:
            for _ in range(50):
                p.send(topic, b"z" * PAYLOAD)
            p.flush(10)
        assert throttle_max() > 0, p.metrics()
    finally:
        p.close(5)


@pytest.mark.long  # 36 s; the default run keeps the quota core's unit test of a change taking effect at once
def test_a_quota_changed_while_a_producer_runs_takes_effect_within_a_couple_of_windows(broker_factory: Any) -> None:
    broker = broker_factory(WINDOWS)
    topic = topic_name("quota-change")
    create_topic(broker.bootstrap, topic)
    entity: dict[str, str | None] = {"client-id": "changing"}
    _set(broker, entity, "producer_byte_rate", float(QUOTA))
    load = ProducerLoad(broker.bootstrap, topic, "changing")
    load.start()
    try:
        time.sleep(WARMUP)  # load: the low quota holds it
        held = _accepted_rate(broker.bootstrap, topic, 6)
        _set(broker, entity, "producer_byte_rate", float(4 * QUOTA))
        time.sleep(2)  # load: two windows after the change
        raised = _accepted_rate(broker.bootstrap, topic, 8)
        _set(broker, entity, "producer_byte_rate", float(QUOTA))
        time.sleep(2)
        lowered = _accepted_rate(broker.bootstrap, topic, 10)
    finally:
        load.finish()
    info = {"held": held, "raised": raised, "lowered": lowered, "errors": load.errors}
    print("changed", info)
    assert held < 1.3 * QUOTA, info
    assert raised > 2 * QUOTA, info
    # Lowered again, the rate of the raised windows is paid back first: at most the quota from then on.
    assert lowered < 1.2 * QUOTA, info
