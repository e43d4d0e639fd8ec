"""A broker's picture of the cluster: the metadata records applied in order, by the same
``ClusterImage.apply`` the controller uses, plus the views the broker's handlers read.

It stands in for the single-node topic registry (``topics`` and ``by_id`` hold the TopicInfo objects
the handlers read) and adds what only a cluster has: brokers and per-partition state.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from epochlog.config_defs import RESOURCE_TOPIC
from epochlog.controller.image import ClusterImage
from epochlog.controller.records import ConfigRecord, MetadataRecord, Topic, TopicDeleted
from epochlog.replication.types import PartitionState
from epochlog.server.internal_topics import OFFSETS_TOPIC, TXN_TOPIC
from epochlog.server.topics import TopicInfo


@dataclass
class BrokerEndpoint:
    broker_id: int
    host: str
    port: int
    epoch: int
    fenced: bool = False
    # listener name -> (host, port): a client is told the addresses of the listener it came in on.
    listeners: dict[str, tuple[str, int]] = field(default_factory=dict)

    def address_for(self, listener: str) -> tuple[str, int]:
        return self.listeners.get(listener, (self.host, self.port))


class MetadataImage:
    def __init__(self) -> None:
        self.cluster = ClusterImage()
        self.brokers: dict[int, BrokerEndpoint] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.by_id: dict[uuid.UUID, TopicInfo] = {}
        self.states: dict[tuple[str, int], PartitionState] = {}
        self.offset = 0  # the next metadata log offset to fetch
        self.last_epoch = -1  # the quorum epoch of the record before it (the fetch's LastFetchedEpoch)
        # Resources whose dynamic configs changed since the broker last took them: (resource type, name).
        self.config_changes: set[tuple[int, str]] = set()
        # The ACLs changed since the broker last handed them to its authorizer.
        self.acls_changed = False

    @property
    def offline_replicas(self) -> dict[int, set[tuple[str, int]]]:
        """Replicas on a failed log directory, per broker (Metadata's offline_replicas), until it registers."""
        return self.cluster.offline_replicas

    def live_brokers(self) -> list[BrokerEndpoint]:
        return [b for _, b in sorted(self.brokers.items()) if not b.fenced]

    def apply(self, record: MetadataRecord) -> tuple[list[tuple[str, int]], list[TopicInfo]]:
        """Apply one record; returns (partitions whose state changed, topics deleted)."""
        applied = self.cluster.apply(record)
        self.acls_changed |= applied.acls
        for b in applied.brokers:
            cb = self.cluster.brokers[b]
            self.brokers[b] = BrokerEndpoint(
                b, cb.host, cb.port, cb.epoch, cb.fenced, {n: (h, p) for n, h, p in cb.listeners}
            )
        if isinstance(record, Topic):
            tid = uuid.UUID(record.id) if record.id else uuid.uuid4()
            info = TopicInfo(
                record.name, tid, 0, dict(record.configs), [], internal=record.name in (OFFSETS_TOPIC, TXN_TOPIC)
            )
            self.topics[info.name] = info
            self.by_id[tid] = info
        if isinstance(record, ConfigRecord):
            for rtype, rname in applied.configs:
                if rtype == RESOURCE_TOPIC and rname in self.topics:
                    self.topics[rname].configs = dict(self.cluster.topics[rname].configs)
                self.config_changes.add((rtype, rname))
        deleted: list[TopicInfo] = []
        if isinstance(record, TopicDeleted):
            gone = self.topics.pop(record.name, None)
            if gone is not None:
                self.by_id.pop(gone.topic_id, None)
                for p in range(gone.partitions):
                    self.states.pop((gone.name, p), None)
                deleted.append(gone)
        changed: list[tuple[str, int]] = []
        for t, p in applied.partitions:
            info = self.topics.get(t)
            if info is None:
                continue
            st = self.cluster.topics[t].partitions[p]
            self.states[(t, p)] = st
            if p >= info.partitions:
                info.leader_epochs += [0] * (p + 1 - info.partitions)
                info.partitions = p + 1
            info.leader_epochs[p] = st.leader_epoch
            changed.append((t, p))
        return changed, deleted
