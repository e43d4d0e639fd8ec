"""A partition as a broker serves it: its log, leader epoch, waiting fetches and acks=all produces.

The sans-IO core in replication/ (``replica``) decides roles, epochs, the ISR and the HW, on a single
node as in a cluster (a single node is a cluster of one); this object mirrors the core's HW into the
log (for checkpoints and reads) and wakes whoever waits on it.
"""

from __future__ import annotations

import asyncio
import bisect
import uuid
from typing import Any

from epochlog.protocol.errors import Err
from epochlog.replication.partition import PartitionReplica, check_epoch
from epochlog.replication.types import Role


def _offset(waiter: tuple[int, Any]) -> int:
    return waiter[0]


class Partition:
    __slots__ = (
        "acks_waiters",
        "delete_waiters",
        "log",
        "offline",
        "partition",
        "replica",
        "topic",
        "topic_id",
        "waiters",
    )

    def __init__(
        self,
        topic: str,
        partition: int,
        topic_id: uuid.UUID,
        log: Any,
        replica: PartitionReplica,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.log = log
        self.replica = replica
        self.waiters: list[asyncio.Future[None]] = []
        # acks=all produces, by last offset: (last offset, future answered with an error code)
        self.acks_waiters: list[tuple[int, asyncio.Future[int]]] = []
        # DeleteRecords waiting for every live replica's log start offset: (required offset, future).
        self.delete_waiters: list[tuple[int, asyncio.Future[int]]] = []
        # Its log directory failed: it answers KAFKA_STORAGE_ERROR until the broker restarts.
        self.offline = False

    @property
    def leader_epoch(self) -> int:
        return self.replica.leader_epoch

    @property
    def is_leader(self) -> bool:
        return self.replica.role is Role.LEADER

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def check_epoch(self, current_leader_epoch: int) -> Err:
        """KIP-320 fencing: a client's view of the epoch must match ours when it gives one; only the
        leader answers clients."""
        if self.offline:
            return Err.KAFKA_STORAGE_ERROR
        if not self.is_leader:
            return Err.NOT_LEADER_OR_FOLLOWER
        return Err(check_epoch(current_leader_epoch, self.leader_epoch))

    def sync(self) -> None:
        """After the core moved: mirror its HW into the log, answer acks=all waiters, wake fetches."""
        if self.offline:
            self._fail_waiters(Err.KAFKA_STORAGE_ERROR)
            return
        r = self.replica
        hw = min(r.high_watermark, self.log.log_end_offset)
        moved = hw != self.log.high_watermark
        self.log.high_watermark = hw
        waiting = self.acks_waiters
        if waiting:
            # Sorted by offset: the answerable ones are a prefix, and the scan stops at the first the core
            # keeps waiting (with 64 requests in flight a full pass per fetch showed in profiles).
            i = 0
            for last, fut in waiting:
                if fut.done():
                    i += 1
                    continue
                code = r.ack_result(last)
                if code is None:
                    break
                fut.set_result(Err(code))
                i += 1
            del waiting[:i]
        if self.delete_waiters:
            self._answer_delete_waiters()
        if moved:
            self.notify()

    def _answer_delete_waiters(self) -> None:
        still = []
        for required, fut in self.delete_waiters:
            if fut.done():
                continue
            code = self.replica.delete_records_result(required)
            if code is None:
                still.append((required, fut))
            else:
                fut.set_result(Err(code))
        self.delete_waiters = still

    def wait_log_start(self, required: int) -> asyncio.Future[int]:
        """A future answered (with an error code) once every live replica starts at ``required`` or later,
        or this replica stops leading."""
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.delete_waiters.append((required, fut))
        self.sync()
        return fut

    def go_offline(self) -> None:
        """The log directory failed: nothing more is acknowledged or read here; fetches waiting on this
        partition wake to find it offline."""
        self.offline = True
        self._fail_waiters(Err.KAFKA_STORAGE_ERROR)
        self.notify()

    def _fail_waiters(self, code: Err) -> None:
        for _last, fut in self.acks_waiters + self.delete_waiters:
            if not fut.done():
                fut.set_result(code)
        self.acks_waiters.clear()
        self.delete_waiters.clear()

    def appended_as_leader(self) -> None:
        """After a leader append the core learns the new log end (the HW moves at once when the ISR is
        this replica alone); then fetches waiting for data wake."""
        self.replica.on_append()
        self.sync()
        self.notify()

    def wait_committed(self, last_offset: int) -> asyncio.Future[int]:
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        bisect.insort(self.acks_waiters, (last_offset, fut), key=_offset)  # at the end, but for a race
        self.sync()
        return fut

    def notify(self) -> None:
        waiters, self.waiters = self.waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)
