"""Broker metrics in Prometheus format, named after Kafka's JMX metrics as its exporters spell them.

Served over HTTP on ``metrics.port`` (0, the default, turns the endpoint off).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.messages_in = Counter(
            "kafka_server_brokertopicmetrics_messagesin", "Records appended", ["topic"], registry=r
        )
        self.bytes_in = Counter(
            "kafka_server_brokertopicmetrics_bytesin", "Record bytes appended", ["topic"], registry=r
        )
        self.bytes_out = Counter(
            "kafka_server_brokertopicmetrics_bytesout", "Record bytes fetched", ["topic"], registry=r
        )
        self.failed_produce = Counter(
            "kafka_server_brokertopicmetrics_failedproducerequests",
            "Produce partitions answered with an error",
            ["topic"],
            registry=r,
        )
        self.requests = Counter("kafka_network_requestmetrics_requests", "Requests handled", ["request"], registry=r)
        self.connections = Gauge("kafka_server_socketservermetrics_connection_count", "Open connections", registry=r)
        self.partitions = Gauge("kafka_server_replicamanager_partitioncount", "Partitions hosted", registry=r)
        self.leaders = Gauge("kafka_server_replicamanager_leadercount", "Partitions led", registry=r)
        self.under_replicated = Gauge(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions whose ISR is smaller than their replica set",
            registry=r,
        )
        self.offline = Gauge(
            "kafka_controller_kafkacontroller_offlinepartitionscount", "Partitions without a leader", registry=r
        )

    def bind(self, broker: Broker) -> None:
        """Gauges read the broker's state at scrape time."""
        self.connections.set_function(lambda: len(broker.connections))
        self.partitions.set_function(lambda: len(broker.partitions))
        self.leaders.set_function(lambda: len(broker.partitions))  # single node: this broker leads all
        self.under_replicated.set_function(lambda: 0)
        self.offline.set_function(lambda: 0)

    def serve(self, host: str, port: int) -> None:
        start_http_server(port, addr=host, registry=self.registry)
