"""The group coordinator's store: the partitions of ``__consumer_offsets`` in the real log."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from epochlog.server import internal_log

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker
    from epochlog.server.partition import Partition


class LogOffsetsStore:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.num_partitions = broker.config.offsets_topic_num_partitions

    def _partition(self, partition: int) -> Partition:
        from epochlog.server.internal_topics import OFFSETS_TOPIC

        part = self.broker.partition(OFFSETS_TOPIC, partition)
        if part is None:
            raise RuntimeError(f"{OFFSETS_TOPIC}-{partition} is not hosted here")
        return part

    async def append(self, partition: int, batch: bytes) -> None:
        """Durable when it returns: once the ISR has it (Kafka writes offsets with acks=all); raises
        otherwise."""
        from epochlog.clock import now_ms

        timeout = self.broker.config.offsets_commit_timeout_ms / 1000
        await internal_log.append_durably(self._partition(partition), batch, timeout, now_ms())

    def read_batches(self, partition: int) -> Iterator[bytes]:
        return internal_log.read_batches(self._partition(partition))
