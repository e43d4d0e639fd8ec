"""The group coordinator's store: the partitions of ``__consumer_offsets`` in the real log."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import TYPE_CHECKING

from epochlog.protocol.errors import Err
from epochlog.protocol.record_batch import iter_batches

if TYPE_CHECKING:
    from epochlog.server.broker_api import BrokerApi as Broker

READ_CHUNK = 4 * 1024 * 1024


class LogOffsetsStore:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.num_partitions = broker.config.offsets_topic_num_partitions

    def _partition(self, partition: int):
        from epochlog.server.broker import OFFSETS_TOPIC

        part = self.broker.partition(OFFSETS_TOPIC, partition)
        if part is None:
            raise RuntimeError(f"{OFFSETS_TOPIC}-{partition} is not hosted here")
        return part

    async def append(self, partition: int, batch: bytes) -> None:
        """Durable when it returns: once the ISR has it (Kafka writes offsets with acks=all); raises
        otherwise."""
        from epochlog.server.broker import now_ms

        part = self._partition(partition)
        replica = part.replica
        if code := replica.check_produce(-1, -1):
            raise RuntimeError(f"{part.topic}-{part.partition} refuses the write: {Err(code).name}")
        result = part.log.append_as_leader(batch, part.leader_epoch, now_ms())
        part.appended_as_leader()
        timeout = self.broker.config.offsets_commit_timeout_ms / 1000
        try:
            code = await asyncio.wait_for(part.wait_committed(result.last_offset), timeout)
        except TimeoutError:
            raise RuntimeError(f"{part.topic}-{part.partition}: no commit by the ISR in {timeout} s") from None
        if code:
            raise RuntimeError(f"{part.topic}-{part.partition}: the write was not committed: {Err(code).name}")

    def read_batches(self, partition: int) -> Iterator[bytes]:
        plog = self._partition(partition).log
        offset = plog.log_start_offset
        while offset < plog.log_end_offset:
            result = plog.read(offset, READ_CHUNK, max_offset=None, min_one_batch=True)
            data = b"".join(bytes(c) for c in result.chunks)
            if not data:
                return
            last_next = offset
            for pos, h in iter_batches(data, validate_crc=False):
                if h.next_offset <= offset:
                    continue
                yield data[pos : pos + h.size]
                last_next = h.next_offset
            if last_next <= offset:
                return
            offset = last_next
