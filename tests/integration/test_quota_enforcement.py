"""Client quotas enforced on one `epochlog up` node: a confluent-kafka producer with producer_byte_rate set
for its client id is held to it within 20% while an unthrottled client id beside it is not, and
librdkafka's statistics report the broker's throttle time."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.broker_process import BrokerProcess
from tests.integration.helpers import create_topic, topic_name
from tests.integration.test_client_quotas import alter

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(240),
    # Unfinished: measured 400 KB/s against a 256 KB/s quota over 20 s (the first num-1 windows' worth of
    # quota goes through before any throttle, as in Kafka, so the span must start after a warm-up), and the
    # neighbour's delivered-bytes count (170 MB/s) is not believable yet.
    pytest.mark.skip(reason="unfinished: measure after a warm-up; the unthrottled neighbour's count is wrong"),
]

QUOTA = 256 * 1024  # bytes per second: well below what one producer reaches on this machine
SECONDS = 20


def _produce_for(bootstrap: str, topic: str, client_id: str, seconds: float, out: dict[str, Any]) -> None:
    throttles: list[int] = []

    def stats(raw: str) -> None:
        for b in json.loads(raw).get("brokers", {}).values():
            throttles.append(int(b.get("throttle", {}).get("max", 0)))

    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": client_id,
            "linger.ms": 5,
            "statistics.interval.ms": 1000,
            "stats_cb": stats,
        }
    )
    payload = b"x" * 1024
    delivered = [0]

    start = time.monotonic()

    def done(err: Any, msg: Any) -> None:
        # Only what was acknowledged within the measured span counts (the queue holds far more).
        if err is None and time.monotonic() - start < seconds:
            delivered[0] += len(msg.value())

    while time.monotonic() - start < seconds:
        try:
            p.produce(topic, payload, on_delivery=done)
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    p.poll(0.1)
    rate = delivered[0] / seconds
    p.purge()
    p.flush(10)
    out.update(rate=rate, throttle_max=max(throttles, default=0))


def test_a_producer_is_held_to_its_quota_and_a_neighbour_is_not(broker: BrokerProcess) -> None:
    topic = topic_name("quota")
    create_topic(broker.bootstrap, topic)
    resp = alter(broker.port, ({"client-id": "slow"}, {"producer_byte_rate": float(QUOTA)}))
    assert int(resp.entries[0].error_code) == 0
    slow: dict[str, Any] = {}
    fast: dict[str, Any] = {}
    threads = [
        threading.Thread(target=_produce_for, args=(broker.bootstrap, topic, "slow", SECONDS, slow)),
        threading.Thread(target=_produce_for, args=(broker.bootstrap, topic, "fast", SECONDS, fast)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    # The delivered rate counts payload bytes only, the quota the request's: allow for batch overhead.
    assert slow["rate"] == pytest.approx(QUOTA, rel=0.2), (slow, fast)
    assert slow["throttle_max"] > 0, slow
    assert fast["rate"] > 2 * QUOTA and fast["throttle_max"] == 0, (slow, fast)
