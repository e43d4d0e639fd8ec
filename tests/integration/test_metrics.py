"""The Prometheus endpoint counts what the broker did, under Kafka's metric names."""

from __future__ import annotations

import urllib.request

from tests.broker_process import free_port
from tests.integration.helpers import produce, topic_name


def test_metrics_endpoint(broker_factory) -> None:  # type: ignore[no-untyped-def]
    port = free_port()
    b = broker_factory({"metrics.port": str(port)})
    topic = topic_name("met")
    produce(b.bootstrap, topic, [b"x" * 10] * 7)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    assert f'kafka_server_brokertopicmetrics_messagesin_total{{topic="{topic}"}} 7.0' in text
    assert 'kafka_network_requestmetrics_requests_total{request="Produce"}' in text
    assert "kafka_server_replicamanager_underreplicatedpartitions 0.0" in text
