"""Group commit's storage side: a log's sync taken apart so that the fsyncs can run off the event loop.

begin_sync (on the loop) notes how far the log ends and which segments hold unsynced writes, each with a
descriptor of its own (a segment deleted or rolled meanwhile closes only its own); run (in a worker
thread: os.fdatasync releases the GIL) syncs them; finish_sync (on the loop again) records what became
durable. A sync covers the writes made before it began and never claims more: writes made while it runs
wait for the next one.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from epochlog.clock import now_ms
from epochlog.storage import fileops

if TYPE_CHECKING:
    from epochlog.storage.partition_log import PartitionLog
    from epochlog.storage.segment import Segment


@dataclass(slots=True)
class SyncPlan:
    end_offset: int  # the log end when the sync began: everything below it is durable once it completes
    truncations: int  # the log's truncation count then: a sync begun before a truncation proves nothing
    segments: list[tuple[Segment, int, int]] = field(default_factory=list)  # (segment, own fd, writes)
    error: Exception | None = None
    seconds: float = 0.0
    ran: bool = False  # only a sync that ran to its end proves anything

    def run(self) -> None:
        """The fsyncs, safe in a worker thread."""
        t0 = time.monotonic()
        try:
            for seg, fd, _writes in self.segments:
                fileops.ops().fdatasync(fd, seg.path)
        except Exception as e:  # an OSError from the disk; anything else is as bad: nothing is proven
            self.error = e
        self.seconds = time.monotonic() - t0
        self.ran = True


def begin_sync(log: PartitionLog) -> SyncPlan:
    plan = SyncPlan(log.log_end_offset, log.truncations)
    try:
        for seg in log.segments:
            if seg.unflushed:
                seg.txn_index.flush()  # small, and written only at transaction aborts
                plan.segments.append((seg, os.dup(seg.fd), seg.writes))
    except OSError:
        close(plan)
        raise
    log.unflushed_messages = 0
    return plan


def close(plan: SyncPlan) -> None:
    for _seg, fd, _writes in plan.segments:
        os.close(fd)
    plan.segments = []


def finish_sync(log: PartitionLog, plan: SyncPlan) -> bool:
    """Record a completed sync; whether the log is durable up to ``plan.end_offset`` (False: the sync
    failed, which takes the log directory offline, or the log was truncated while it ran)."""
    done = [(seg, writes) for seg, _fd, writes in plan.segments]
    close(plan)
    if not plan.ran:
        return False
    if plan.error is not None:
        # A failed fsync is never retried: the kernel may have dropped the pages it could not write.
        log.failures.mark_offline(log.log_dir, f"sync of {log.topic}-{log.partition}: {plan.error}")
        return False
    for seg, writes in done:
        seg.mark_synced(writes)
    if plan.truncations != log.truncations:
        return False
    log.recovery_point = max(log.recovery_point, min(plan.end_offset, log.log_end_offset))
    log.last_flush_ms = now_ms()
    return True
