"""The log cleaner of a broker: which log to clean next, ``cleaner-offset-checkpoint``, and the threads.

Kafka's LogCleaner and LogCleanerManager, reduced to what epochlog needs. Each of
``log.cleaner.threads`` threads repeatedly takes the filthiest compacted log (the highest dirty ratio
among those at or past their ``min.cleanable.dirty.ratio``, or whose ``max.compaction.lag.ms`` or
tombstone delete horizon has passed), cleans it, and sleeps ``log.cleaner.backoff.ms`` when none needs
it. Compaction is per replica, as in Kafka: leaders and followers clean their own logs.

Threads: everything that looks at or changes a PartitionLog (choosing, taking the view, the swap,
the checkpoint, taking a directory offline) runs on the log's owner, the event loop, through
``run_on_owner``; the cleaner's thread only reads segment files through its own descriptors and writes
``.cleaned`` files. So the produce path takes no lock, and waits for the cleaner only during a swap (a
few renames and two directory syncs).
"""

from __future__ import annotations

import concurrent.futures
import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from epochlog.clock import now_ms as _now_ms
from epochlog.protocol.record_batch import CorruptBatchError
from epochlog.storage import checkpoints, fileops
from epochlog.storage.cleaner import process
from epochlog.storage.cleaner.cleaner import (
    Cleanable,
    Cleaner,
    CleaningAborted,
    CleanStats,
    LogView,
    RunOnOwner,
    cleanable_range,
    discard,
    needs_cleaning,
    run_here,
)
from epochlog.storage.cleaner.config import CLEANER_OFFSET_CHECKPOINT, CleanerConfig
from epochlog.storage.cleaner.swap import CLEANED
from epochlog.storage.cleaner.throttler import Throttler
from epochlog.storage.errors import KafkaStorageError
from epochlog.storage.segment import Segment

if TYPE_CHECKING:
    import asyncio

    from epochlog.storage.log_dirs import LogDirs
    from epochlog.storage.partition_log import PartitionLog

log = logging.getLogger("epochlog.cleaner")

T = TypeVar("T")
Key = tuple[str, int]



class LoopOwner:
    """run_on_owner for a log owned by an asyncio loop: the call runs there and this thread waits for it.
    Once ``stopping`` is set a call not yet started is cancelled (the loop may be shutting down)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, stopping: threading.Event) -> None:
        self.loop = loop
        self.stopping = stopping

    def __call__(self, fn: Callable[[], T]) -> T:
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()

        def call() -> None:
            if not fut.set_running_or_notify_cancel():
                return
            try:
                fut.set_result(fn())
            except BaseException as e:
                fut.set_exception(e)

        self.loop.call_soon_threadsafe(call)
        while True:
            try:
                return fut.result(timeout=0.2)
            except concurrent.futures.TimeoutError:
                if self.stopping.is_set() and fut.cancel():
                    raise CleaningAborted("the broker is stopping") from None


class LogCleaner:
    def __init__(
        self,
        log_dirs: LogDirs,
        config: CleanerConfig,
        run_on_owner: RunOnOwner = run_here,
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        self.log_dirs = log_dirs
        self.config = config
        self.clock = clock
        self.stopping = threading.Event()
        self.run_on_owner: RunOnOwner = run_on_owner
        self.throttler = Throttler(config.io_max_bytes_per_second)
        # A stop does not wait for a (throttled, possibly long) cleaning to finish: it is dropped.
        self.cleaner = Cleaner(self.throttler, self._owner, config.max_map_entries, alive=self._not_stopping)
        self._threads: list[threading.Thread] = []
        self._pool: ProcessPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._checkpoints: dict[str, dict[Key, int]] = {}
        self._in_progress: set[int] = set()
        self._uncleanable: set[int] = set()  # id(plog): a corrupt batch stopped its cleaning
        self._horizons: dict[int, int] = {}  # id(plog) -> earliest delete horizon it keeps
        self.rounds = 0
        self.last_stats: CleanStats | None = None
        # For Kafka's LogCleaner / LogCleanerManager metrics (server/metrics.py reads them).
        self.max_dirty_ratio = 0.0  # of the compacted logs seen at the last pick
        self.last_run_ms = clock()
        for m in log_dirs.managers:
            self._checkpoints[str(m.dir)] = checkpoints.read_offsets(m.dir / CLEANER_OFFSET_CHECKPOINT)

    def _not_stopping(self) -> bool:
        return not self.stopping.is_set()

    def _owner(self, fn: Callable[[], T]) -> T:
        result: T = self.run_on_owner(fn)
        return result

    # -- threads -------------------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        if not self.config.enable or self.config.threads == 0:
            log.info("log cleaner disabled (log.cleaner.enable=false or log.cleaner.threads=0)")
            return
        if loop is not None:
            self.run_on_owner = LoopOwner(loop, self.stopping)
        for i in range(self.config.threads):
            t = threading.Thread(target=self._run, name=f"kafka-log-cleaner-thread-{i}", daemon=True)
            self._threads.append(t)
            t.start()
        log.info(
            "log cleaner started: %d thread(s), backoff %d ms, io max %s bytes/s",
            self.config.threads,
            self.config.backoff_ms,
            self.config.io_max_bytes_per_second,
        )

    def request_stop(self) -> None:
        self.stopping.set()

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                cleaned = self.clean_once()
            except CleaningAborted:
                cleaned = False
            except Exception:
                log.exception("log cleaner round failed")
                cleaned = False
            if not cleaned:
                self.stopping.wait(self.config.backoff_ms / 1000)

    # -- one round -----------------------------------------------------------------------------
    def clean_once(self, now_ms: int | None = None) -> bool:
        """Clean the filthiest log, if any needs it; True when one was cleaned."""
        now = self.clock() if now_ms is None else now_ms
        picked = self._owner(lambda: self._pick(now))
        if picked is None:
            return False
        plog, view, rng, why = picked
        key = id(plog)
        try:
            log.info(
                "%s: cleaning (%s; %d clean bytes, %d dirty bytes from offset %d)",
                view.name,
                why,
                rng.clean_bytes,
                rng.dirty_bytes,
                rng.first_dirty,
            )
            if self.config.process:
                stats = self._clean_in_process(plog, view, rng, now)
            else:
                stats = self.cleaner.clean(plog, view, rng, now, is_live=lambda: self._is_live(plog))
        except BrokenProcessPool as e:
            log.error("%s: the cleaner process died (%s); starting another", view.name, e)
            self._pool = None
            return False
        except CleaningAborted as e:
            log.info("%s: cleaning aborted: %s", view.name, e)
            return False
        except CorruptBatchError as e:
            log.error("%s: cleaning stopped, the log stays uncompacted until restart: %s", view.name, e)
            self._uncleanable.add(key)
            return False
        except KafkaStorageError as e:
            log.error("%s: cleaning failed: %s", view.name, e)
            return False
        except OSError as e:
            err = e
            self._owner(lambda: self._io_failed(plog, err))
            return False
        finally:
            view.close()
            self._in_progress.discard(key)  # a set's discard is atomic; _pick reads it on the owner
        if stats.next_horizon_ms >= 0:
            self._horizons[key] = stats.next_horizon_ms
        else:
            self._horizons.pop(key, None)
        self.rounds += 1
        self.last_stats = stats
        self.last_run_ms = self.clock()
        self._owner(lambda: self._checkpoint(plog, stats.end_offset))
        return True

    # -- the cleaner process (process.py says why) ------------------------------------------------
    def _process_pool(self) -> ProcessPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    max_workers=max(self.config.threads, 1),
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=process.child_init,
                    initargs=(os.getpid(),),
                )
            return self._pool

    def _clean_in_process(self, plog: PartitionLog, view: LogView, rng: Cleanable, now: int) -> CleanStats:
        t0 = time.monotonic()
        rate = self.config.io_max_bytes_per_second / max(self.config.threads, 1)
        job = process.job_for(view, rng, now, self.config.max_map_entries, rate)
        fut = self._process_pool().submit(process.run, job)
        while True:  # waiting here holds no GIL; the event loop runs freely
            try:
                result: process.Result = fut.result(timeout=0.2)
                break
            except concurrent.futures.TimeoutError:
                if self.stopping.is_set():
                    fut.cancel()
                    raise CleaningAborted("the broker is stopping") from None
        by_base = {s.base: s for s in view.segments}
        pending = list(result.groups)
        try:
            while pending:
                base, olds = pending[0]
                group = [by_base[b] for b in olds]
                cleaned = Segment(view.directory, base, view.config.index_interval_bytes, now, suffix=CLEANED)
                if not cleaned.load_indexes():
                    cleaned.scan(validate_crc=True)
                # The child keeps each group's last batch, so a group's cleaned segment ends where its
                # last segment ended; anything else (a file gone or cut short) must not be swapped in.
                if group[-1].size and cleaned.next_offset != group[-1].next_offset:
                    discard(cleaned)
                    raise CleaningAborted(f"{view.name}: the cleaned segment {base} is not whole")
                pending.pop(0)
                self.cleaner.swap_group(plog, view, group, cleaned, lambda: self._is_live(plog))
        finally:
            for base, _olds in pending:  # groups never swapped in
                for suffix in (".log", ".index", ".timeindex", ".txnindex"):
                    fileops.ops().unlink(view.directory / f"{base:020d}{suffix}{CLEANED}")
        stats = result.stats
        stats.seconds = time.monotonic() - t0
        Cleaner.log_stats(view, stats)
        return stats

    def close(self) -> None:
        """After the threads stopped: let the cleaner process go (a job it still runs stops when it
        finds its parent gone; its ``.cleaned`` files are removed at the next start)."""
        with self._pool_lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None

    def _logs(self) -> list[tuple[str, PartitionLog]]:
        return [(str(m.dir), plog) for m in self.log_dirs.online for plog in m.logs.values()]

    def _is_live(self, plog: PartitionLog) -> bool:
        return (
            self.log_dirs.get(plog.topic, plog.partition) is plog
            and bool(plog.segments)
            and not plog.failures.is_offline(plog.log_dir)
        )

    def _pick(self, now: int) -> tuple[PartitionLog, LogView, Cleanable, str] | None:
        best: tuple[float, PartitionLog, Cleanable, str, LogView] | None = None
        self.max_dirty_ratio = 0.0
        for d, plog in self._logs():
            key = id(plog)
            if not plog.config.compact or key in self._in_progress or key in self._uncleanable:
                continue
            if len(plog.segments) < 2:
                continue
            view = plog.cleaning_view(with_files=False)
            rng = cleanable_range(view, self._checkpoints.get(d, {}).get((plog.topic, plog.partition)), now)
            if rng.dirty:
                view.first_dirty_ts = plog.first_batch_timestamp(rng.dirty[0].base)
            self.max_dirty_ratio = max(self.max_dirty_ratio, rng.dirty_ratio)
            horizon = self._horizons.get(key, -1)
            why = needs_cleaning(view, rng, now, tombstone_due=0 <= horizon <= now)
            if why is None:
                continue
            score = rng.dirty_ratio if rng.dirty else 0.0
            if best is None or score > best[0]:
                best = (score, plog, rng, why, view)
        if best is None:
            return None
        _score, plog, _rng, why, _view = best
        # Take the files now, on the owner, so the segments the range names are the ones opened.
        view = plog.cleaning_view(with_files=True)
        rng = _rng.rebind(view)
        view.first_dirty_ts = _view.first_dirty_ts
        self._in_progress.add(id(plog))
        return plog, view, rng, why

    def _checkpoint(self, plog: PartitionLog, end_offset: int) -> None:
        if not self._is_live(plog):
            return
        d = plog.log_dir
        offsets = self._checkpoints.setdefault(d, {})
        offsets[(plog.topic, plog.partition)] = end_offset
        manager = next((m for m in self.log_dirs.managers if str(m.dir) == d), None)
        if manager is not None:
            for k in [k for k in offsets if k not in manager.logs]:
                del offsets[k]  # deleted or moved partitions
        try:
            with plog.failures.guard(d, "writing the cleaner offset checkpoint"):
                checkpoints.write_offsets(Path(d) / CLEANER_OFFSET_CHECKPOINT, offsets)
        except KafkaStorageError as e:
            log.error("%s", e)

    def _io_failed(self, plog: PartitionLog, e: OSError) -> None:
        if self._is_live(plog):
            plog.failures.mark_offline(plog.log_dir, f"cleaning {plog.topic}-{plog.partition}: {e}")

    @property
    def uncleanable_count(self) -> int:
        return len(self._uncleanable)

    def checkpoint_of(self, plog: PartitionLog) -> int | None:
        return self._checkpoints.get(plog.log_dir, {}).get((plog.topic, plog.partition))
