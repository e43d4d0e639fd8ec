"""A broker's picture of the cluster, built by applying the controller's metadata records in order.

It stands in for the single-node topic registry (``topics`` and ``by_id`` hold the same TopicInfo
objects the handlers read) and adds what only a cluster has: brokers and per-partition state.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from epochlog.replication.types import PartitionState
from epochlog.server.broker import OFFSETS_TOPIC
from epochlog.server.topics import TopicInfo


@dataclass
class BrokerEndpoint:
    broker_id: int
    host: str
    port: int
    epoch: int
    fenced: bool = False


class MetadataImage:
    def __init__(self) -> None:
        self.brokers: dict[int, BrokerEndpoint] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.by_id: dict[uuid.UUID, TopicInfo] = {}
        self.states: dict[tuple[str, int], PartitionState] = {}
        self.offset = 0  # the next metadata log offset to fetch
        self.last_epoch = -1  # the quorum epoch of the record before it (the fetch's LastFetchedEpoch)
        # Replicas on a failed log directory, per broker (Metadata's offline_replicas), until it registers.
        self.offline_replicas: dict[int, set[tuple[str, int]]] = {}

    def live_brokers(self) -> list[BrokerEndpoint]:
        return [b for _, b in sorted(self.brokers.items()) if not b.fenced]

    def apply(self, kind: str, d: dict[str, Any]) -> tuple[list[tuple[str, int]], list[TopicInfo]]:
        """Apply one record; returns (partitions whose state changed, topics deleted)."""
        if kind == "ReplicasOffline":
            self.offline_replicas.setdefault(d["broker"], set()).update((t, p) for t, p in d["partitions"])
        elif kind == "BrokerRegistration":
            self.offline_replicas.pop(d["broker"], None)
            self.brokers[d["broker"]] = BrokerEndpoint(d["broker"], d.get("host", ""), d.get("port", 0), d["epoch"])
        elif kind in ("BrokerFenced", "BrokerShuttingDown"):
            b = self.brokers.get(d["broker"])
            if b is not None:
                b.fenced = True
        elif kind == "Topic":
            tid = uuid.UUID(d["id"]) if d.get("id") else uuid.uuid4()
            info = TopicInfo(d["name"], tid, 0, dict(d.get("configs", {})), [], internal=d["name"] == OFFSETS_TOPIC)
            self.topics[info.name] = info
            self.by_id[tid] = info
        elif kind == "TopicDeleted":
            info = self.topics.pop(d["name"], None)
            if info is not None:
                self.by_id.pop(info.topic_id, None)
                for p in range(info.partitions):
                    self.states.pop((info.name, p), None)
                return [], [info]
        elif kind == "PartitionChange":
            info = self.topics.get(d["topic"])
            if info is None:
                return [], []
            p = d["partition"]
            st = PartitionState(
                d["leader"], d["leader_epoch"], frozenset(d["isr"]), tuple(d["replicas"]), d["partition_epoch"]
            )
            self.states[(info.name, p)] = st
            if p >= info.partitions:
                info.leader_epochs += [0] * (p + 1 - info.partitions)
                info.partitions = p + 1
            info.leader_epochs[p] = st.leader_epoch
            return [(info.name, p)], []
        return [], []
