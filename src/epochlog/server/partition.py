"""A partition as a broker serves it: its log, leader epoch, waiting fetches and acks=all produces.

The sans-IO core in replication/ (``replica``) decides roles, epochs, the ISR and the HW, on a single
node as in a cluster (a single node is a cluster of one), and it is the only way to write as leader
(``append``); this object carries out what the core decided: it answers acks=all waiters once the core
says so and wakes fetches waiting for data. The HW and the LSO live in the core alone; the log reads them
there (PartitionLog.bind_high_watermark).
"""

from __future__ import annotations

import asyncio
import bisect
import uuid
from typing import TYPE_CHECKING, Any

from epochlog.clock import now_ms
from epochlog.protocol.errors import Err
from epochlog.replication.partition import PartitionReplica, check_epoch
from epochlog.replication.types import LeaderAppend, Role

if TYPE_CHECKING:
    from epochlog.server.group_commit import GroupCommit


def _offset(waiter: tuple[int, Any]) -> int:
    return waiter[0]


class Partition:
    __slots__ = (
        "acks_waiters",
        "delete_waiters",
        "group_commit",
        "last_hw",
        "log",
        "offline",
        "partition",
        "replica",
        "sync_waiters",
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
        group_commit: GroupCommit | None = None,
    ) -> None:
        """``group_commit``: the broker's syncer; without it (tests of a bare partition) the log flushes inside
        its appends as its policy says, and nothing waits for a sync."""
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.log = log
        self.replica = replica
        self.waiters: list[asyncio.Future[None]] = []
        # acks=all produces, by last offset: (last offset, future answered with an error code)
        self.acks_waiters: list[tuple[int, asyncio.Future[int]]] = []
        # acks=1 produces under a sync-before-ack policy, by last offset: they wait for this log's sync only.
        self.sync_waiters: list[tuple[int, asyncio.Future[int]]] = []
        # DeleteRecords waiting for every live replica's log start offset: (required offset, future).
        self.delete_waiters: list[tuple[int, asyncio.Future[int]]] = []
        # Its log directory failed: it answers KAFKA_STORAGE_ERROR until the broker restarts.
        self.offline = False
        log.bind_high_watermark(replica)
        self.last_hw = replica.high_watermark  # the HW fetches were last woken for
        self.group_commit = group_commit
        if group_commit is not None:
            log.on_dirty = self._log_dirty
        self.apply_flush_policy()

    def apply_flush_policy(self) -> None:
        """flush.messages=1 makes every acknowledgement wait for a sync (replication/durability.py); called
        at start and whenever the topic's configs change."""
        durable = self.group_commit is not None and self.log.config.flush_interval_messages == 1
        d = self.replica.durability
        if durable == d.sync_before_ack:
            return
        d.sync_before_ack = durable
        if durable:
            # What is on disk now may be in the page cache only (a process killed, not a machine): the
            # first sync covers the active segment whatever this process wrote.
            self.log.active.unflushed = True
            assert self.group_commit is not None
            self.group_commit.mark(self)
        elif self.sync_waiters:
            self.sync()  # nothing waits for a sync any more

    def _log_dirty(self, _log: Any) -> None:
        if self.group_commit is not None:
            self.group_commit.mark(self)

    @property
    def leader_epoch(self) -> int:
        return self.replica.leader_epoch

    @property
    def is_leader(self) -> bool:
        return self.replica.role is Role.LEADER

    @property
    def high_watermark(self) -> int:
        return self.replica.high_watermark

    def check_epoch(self, current_leader_epoch: int) -> Err:
        """KIP-320 fencing: a client's view of the epoch must match ours when it gives one; only the
        leader answers clients."""
        if self.offline:
            return Err.KAFKA_STORAGE_ERROR
        if not self.is_leader:
            return Err.NOT_LEADER_OR_FOLLOWER
        return Err(check_epoch(current_leader_epoch, self.leader_epoch))

    def sync(self) -> None:
        """After the core moved: answer the acks=all waiters it releases, wake fetches if the HW moved."""
        if self.offline:
            self._fail_waiters(Err.KAFKA_STORAGE_ERROR)
            return
        r = self.replica
        moved = r.high_watermark != self.last_hw
        self.last_hw = r.high_watermark
        waiting = self.acks_waiters
        if waiting:
            # Sorted by offset: the answerable ones are a prefix, and the scan stops at the first the core
            # keeps waiting (with 64 requests in flight a full pass per fetch showed in profiles).
            now = now_ms()
            i = 0
            for last, fut in waiting:
                if fut.done():
                    i += 1
                    continue
                code = r.ack_result(last, now)
                if code is None:
                    break
                fut.set_result(Err(code))
                i += 1
            del waiting[:i]
        if self.sync_waiters:
            self._answer_sync_waiters()
        if self.delete_waiters:
            self._answer_delete_waiters()
        if moved:
            self.notify()

    def _answer_sync_waiters(self) -> None:
        waiting = self.sync_waiters
        i = 0
        for last, fut in waiting:
            if not fut.done():
                code = self.replica.ack_result(last, now_ms(), acks=1)
                if code is None:
                    break
                fut.set_result(Err(code))
            i += 1
        del waiting[:i]

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
        for _last, fut in self.acks_waiters + self.sync_waiters + self.delete_waiters:
            if not fut.done():
                fut.set_result(code)
        self.acks_waiters.clear()
        self.sync_waiters.clear()
        self.delete_waiters.clear()

    def append(self, records: Any, now_ms: int, acks: int = -1, producer_epoch: int = -1) -> LeaderAppend:
        """Write as leader through the core (Produce, coordinator records, transaction markers alike), then
        carry out what follows: waiters the HW now releases are answered and fetches waiting for data wake.
        Storage refusals raise, as the core's append does."""
        if self.offline:
            return LeaderAppend(Err.KAFKA_STORAGE_ERROR)
        result = self.replica.append(records, now_ms, acks, producer_epoch)
        if result.error == Err.NONE and not result.duplicate:
            self.sync()
            self.notify()
        return result

    def wait_committed(self, last_offset: int, acks: int = -1) -> asyncio.Future[int]:
        """A future answered with the produce's error code once the core releases it: acks=all at the HW,
        acks=1 (under a sync-before-ack policy) at this log's sync."""
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        waiters = self.acks_waiters if acks == -1 else self.sync_waiters
        bisect.insort(waiters, (last_offset, fut), key=_offset)  # at the end, but for a race
        self.sync()
        return fut

    def notify(self) -> None:
        waiters, self.waiters = self.waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)
