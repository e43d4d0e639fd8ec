"""A broker's copy of the cluster metadata: the controller's own ``ClusterImage``, applied record by record
with the same ``ClusterImage.apply``, plus where this broker is in the metadata log.

The handlers read the controller's types directly (``TopicInfo``, ``BrokerInfo``, ``PartitionState``): a
record means one thing on every broker and on the controller, and no broker makes up a topic's id.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping

from epochlog.controller.image import Applied, BrokerInfo, ClusterImage, TopicInfo
from epochlog.controller.records import MetadataRecord
from epochlog.replication.types import PartitionState

TopicPartition = tuple[str, int]


class PartitionStates(Mapping[TopicPartition, PartitionState]):
    """Every partition's state by (topic, partition): a view of the image's topics, never a copy."""

    def __init__(self, topics: Mapping[str, TopicInfo]) -> None:
        self._topics = topics

    def __getitem__(self, key: TopicPartition) -> PartitionState:
        return self._topics[key[0]].partitions[key[1]]

    def __iter__(self) -> Iterator[TopicPartition]:
        for name, info in self._topics.items():
            for p in info.partitions:
                yield name, p

    def __len__(self) -> int:
        return sum(len(info.partitions) for info in self._topics.values())


class MetadataImage:
    def __init__(self) -> None:
        self.cluster = ClusterImage()
        self.states = PartitionStates(self.cluster.topics)
        self.offset = 0  # the next metadata log offset to fetch
        self.last_epoch = -1  # the quorum epoch of the record before it (the fetch's LastFetchedEpoch)
        # Resources whose dynamic configs changed since the broker last took them: (resource type, name).
        self.config_changes: set[tuple[int, str]] = set()
        # The ACLs changed since the broker last handed them to its authorizer.
        self.acls_changed = False

    @property
    def topics(self) -> dict[str, TopicInfo]:
        return self.cluster.topics

    @property
    def brokers(self) -> dict[int, BrokerInfo]:
        return self.cluster.brokers

    @property
    def offline_replicas(self) -> dict[int, set[tuple[str, int]]]:
        """Replicas on a failed log directory, per broker (Metadata's offline_replicas), until it registers."""
        return self.cluster.offline_replicas

    def live_brokers(self) -> list[BrokerInfo]:
        return [b for _, b in sorted(self.cluster.brokers.items()) if not b.fenced]

    def topic_name_for_id(self, topic_id: uuid.UUID) -> str | None:
        return self.cluster.topic_names.get(topic_id)

    def apply(self, record: MetadataRecord) -> Applied:
        """Apply one record, noting the configs and ACLs the broker has yet to take."""
        applied = self.cluster.apply(record)
        self.acls_changed |= applied.acls
        self.config_changes.update(applied.configs)
        return applied
