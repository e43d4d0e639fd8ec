"""A partition as the single-node broker serves it: its log, leader epoch and waiting fetches.

Single-node mode: this broker leads every partition, the ISR is itself and the high watermark
is the log end offset once an append is in the log. The multi-broker path (issue 3) replaces
these decisions with the sans-IO core in replication/.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from epochlog.protocol.errors import Err
from epochlog.replication.partition import check_epoch


class Partition:
    __slots__ = ("leader_epoch", "log", "partition", "topic", "topic_id", "waiters")

    def __init__(self, topic: str, partition: int, topic_id: uuid.UUID, log: Any, leader_epoch: int) -> None:
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.log = log
        self.leader_epoch = leader_epoch
        self.waiters: list[asyncio.Future[None]] = []

    def become_leader(self) -> None:
        """KIP-101 step 3: record (epoch, LEO) and flush it before taking writes."""
        self.log.epoch_cache.assign(self.leader_epoch, self.log.log_end_offset)
        self.log.high_watermark = self.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def check_epoch(self, current_leader_epoch: int) -> Err:
        """KIP-320 fencing: a client's view of the epoch must match ours when it gives one."""
        return Err(check_epoch(current_leader_epoch, self.leader_epoch))

    def notify(self) -> None:
        waiters, self.waiters = self.waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)
