"""Group commit: the logs whose flush policy calls for a sync are synced once per event-loop turn, in a
worker thread, and what became durable is reported to each partition's core only then.

A produce (or a follower's append) marks its log dirty; at the end of the turn one job syncs every dirty
log, one fdatasync per segment written to, covering every batch appended to it in that turn (and in the
turns that ran while the previous sync of that log was in flight). The loop goes on serving meanwhile;
nothing is acknowledged on the strength of it until the job is back: the core counts a log's records
toward acks=1, the HW and a follower's fetch offset only once synced (replication/durability.py).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from epochlog.storage.errors import KafkaStorageError
from epochlog.storage.log_sync import SyncPlan

if TYPE_CHECKING:
    from epochlog.server.partition import Partition

log = logging.getLogger("epochlog.storage")


def _run_all(plans: list[SyncPlan]) -> None:
    for plan in plans:
        plan.run()


class GroupCommit:
    def __init__(self) -> None:
        self._dirty: dict[int, Partition] = {}
        self._in_flight: set[int] = set()  # partitions (by id) whose sync runs now: one at a time each
        self._scheduled = False
        self._waiters: dict[int, list[asyncio.Future[None]]] = {}
        # One thread: syncs of files on one disk gain nothing from running side by side, and one job per
        # turn keeps the thread hand-offs to one.
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="group-commit")
        self.jobs = 0  # one per turn that had something to sync
        self.fsyncs = 0  # segment syncs made

    def mark(self, part: Partition) -> None:
        """``part``'s log has writes to sync; they are synced at the end of this turn (or once the sync
        running now is back)."""
        self._dirty[id(part)] = part
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._run)

    async def settle(self, parts: list[Partition], timeout: float) -> None:
        """Until every one of ``parts`` has its log synced as far as it ends now (or ``timeout`` passes, or
        it goes offline): what a follower waits for before it reports its fetch offset."""
        loop = asyncio.get_running_loop()
        futs = []
        for part in parts:
            if part.offline or not part.replica.needs_sync():
                continue
            fut: asyncio.Future[None] = loop.create_future()
            self._waiters.setdefault(id(part), []).append(fut)
            futs.append(fut)
            self.mark(part)
        if futs:
            await asyncio.wait(futs, timeout=timeout)
            for f in futs:
                f.cancel()

    def _run(self) -> None:
        self._scheduled = False
        jobs: list[tuple[Partition, SyncPlan]] = []
        for key, part in list(self._dirty.items()):
            if key in self._in_flight:
                continue  # its next sync begins when this one is back
            del self._dirty[key]
            if part.offline or not part.log.segments:  # offline, or deleted since it was marked
                self._wake(part)
                continue
            try:
                plan = part.log.begin_sync()
            except KafkaStorageError as e:
                log.error("%s", e)  # its directory is offline now; the broker takes its partitions offline
                self._wake(part)
                continue
            except Exception:
                log.exception("%s-%d: cannot begin a sync", part.topic, part.partition)
                self._wake(part)
                continue
            self._in_flight.add(key)
            jobs.append((part, plan))
        if not jobs:
            return
        self.jobs += 1
        self.fsyncs += sum(len(plan.segments) for _part, plan in jobs)
        done = asyncio.get_running_loop().run_in_executor(self._executor, _run_all, [plan for _p, plan in jobs])
        done.add_done_callback(lambda _f: self._done(jobs))

    def _done(self, jobs: list[tuple[Partition, SyncPlan]]) -> None:
        for part, plan in jobs:
            self._in_flight.discard(id(part))
            try:
                if part.log.finish_sync(plan) and not part.offline:
                    part.replica.synced(plan.end_offset)
                    part.sync()  # acks it releases, fetches to wake if the HW moved
                settled = part.offline or not part.log.segments or not part.replica.needs_sync()
            except Exception:
                log.exception("%s-%d: cannot complete a sync", part.topic, part.partition)
                settled = True
            if settled:
                self._wake(part)
            else:
                self._dirty[id(part)] = part  # written to while it ran (or truncated): once more
        if self._dirty and not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._run)

    def _wake(self, part: Partition) -> None:
        for fut in self._waiters.pop(id(part), []):
            if not fut.done():
                fut.set_result(None)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
