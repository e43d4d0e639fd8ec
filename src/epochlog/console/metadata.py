"""The whole cluster's metadata in one Metadata request, leader epochs included.

confluent-kafka's ClusterMetadata hides each partition's leader epoch and offline replicas, and the epoch is
what this console is about, so the request is sent with the project's own wire client (client/wire.py).
Metadata v9 is served by Kafka >= 2.4 and by epochlog, so the console works against either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from epochlog.client.epochs import metadata_request, parse_bootstrap
from epochlog.client.wire import Connection, ConnectionPool, WireError


@dataclass(frozen=True, slots=True)
class Broker:
    node_id: int
    host: str
    port: int
    rack: str | None


@dataclass(frozen=True, slots=True)
class Partition:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]
    error: int

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)

    @property
    def is_offline(self) -> bool:
        # Kafka's OfflinePartitionsCount: no live leader.
        return self.leader < 0


@dataclass(frozen=True, slots=True)
class Topic:
    name: str
    internal: bool
    error: int
    partitions: tuple[Partition, ...]


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[Broker, ...]
    topics: dict[str, Topic] = field(default_factory=dict)


def parse_metadata(resp: Any) -> ClusterMetadata:
    """Our types from kio's MetadataResponse (kept apart from the I/O so it can be tested on crafted answers)."""
    topics: dict[str, Topic] = {}
    for t in resp.topics:
        parts = tuple(
            sorted(
                (
                    Partition(
                        topic=t.name,
                        partition=p.partition_index,
                        leader=p.leader_id,
                        leader_epoch=p.leader_epoch,
                        replicas=tuple(p.replica_nodes),
                        isr=tuple(p.isr_nodes),
                        offline=tuple(p.offline_replicas),
                        error=p.error_code.value,
                    )
                    for p in t.partitions
                ),
                key=lambda p: p.partition,
            )
        )
        topics[t.name] = Topic(t.name, bool(t.is_internal), t.error_code.value, parts)
    brokers = tuple(sorted((Broker(b.node_id, b.host, b.port, b.rack) for b in resp.brokers), key=lambda b: b.node_id))
    return ClusterMetadata(resp.cluster_id, resp.controller_id, brokers, topics)


class MetadataClient:
    """Asks any reachable broker: first those the last answer named, then the bootstrap list."""

    def __init__(self, bootstrap: str, timeout: float = 5.0) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.timeout = timeout
        self._pool = ConnectionPool(timeout, client_id="epochlog-console")
        self._known: list[tuple[str, int]] = []
        self._first: list[tuple[str, int]] = []

    def _conn(self, addr: tuple[str, int]) -> Connection:
        return self._pool.get(addr)

    def fetch(self, topics: list[str] | None = None) -> ClusterMetadata:
        """All topics when topics is None."""
        req = metadata_request(topics)
        last: Exception | None = None
        # The broker that answered last is asked first: a killed broker refuses at once, but a stopped one
        # (SIGSTOP, a partition) costs a whole timeout each time it is tried, and once is enough.
        for addr in dict.fromkeys(self._first + self._known + self.bootstrap):
            try:
                resp = self._conn(addr).request(req)
            except WireError as e:
                last = e
                continue
            md = parse_metadata(resp)
            self._known = [(b.host, b.port) for b in md.brokers]
            self._first = [addr]
            return md
        raise WireError(f"no broker answered Metadata: {last}")

    def close(self) -> None:
        self._pool.close()
