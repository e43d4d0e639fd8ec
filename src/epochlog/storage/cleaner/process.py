"""The cleaner's heavy part in a process of its own (opt-in: epochlog.log.cleaner.process=true).

Written because a cleaner thread shares the GIL with the event loop: the reading, mapping and writing
of ``.cleaned`` files run here in a child process (spawned, niced), and the broker's cleaner thread
only hands it a job, waits without the GIL, and swaps the results in on the event loop, with the same
checks as ever. Off by default because it measured no better: on an idle machine produce p99 was the
same either way, and with a core kept busy by another process it was worse (the child takes CPU the
broker then lacks); docs/operations.md, "Log compaction", has the numbers.

The child opens the segment files by name. The names are those of the view the owner took; nothing
but the owner renames or deletes segment files, and the swap re-checks the segments (same objects,
sizes and truncation count) before anything of the child's output is used, so a file retention or a
truncation removed meanwhile only makes the cleaning abort. A child whose broker died stops at its next
chunk, and an idle one within half a second; ``.cleaned`` files it leaves are removed at the next start,
never swapped in.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from epochlog.storage.cleaner.cleaner import (
    Cleanable,
    Cleaner,
    CleaningAborted,
    CleanStats,
    LogView,
    SegmentInfo,
    discard,
)
from epochlog.storage.cleaner.throttler import Throttler
from epochlog.storage.config import LogConfig
from epochlog.storage.transaction_index import AbortedTxn

log = logging.getLogger("epochlog.cleaner")


@dataclass
class Job:
    directory: Path
    name: str
    # (base, next offset, size, largest timestamp) of the closed segments the range names, oldest first
    segments: list[tuple[int, int, int, int]]
    clean: list[int]  # base offsets
    dirty: list[int]
    first_dirty: int
    log_start: int
    config: LogConfig
    producer_last_offsets: dict[int, int]
    now_ms: int
    max_map_entries: int
    io_max_bytes_per_second: float
    parent_pid: int
    aborted: list[AbortedTxn] = field(default_factory=list)
    marker_epochs: dict[int, int] = field(default_factory=dict)


@dataclass
class Result:
    stats: CleanStats
    # each group written: (base offset of its .cleaned segment, base offsets of the segments it replaces)
    groups: list[tuple[int, list[int]]] = field(default_factory=list)


def job_for(view: LogView, rng: Cleanable, now_ms: int, max_map_entries: int, rate: float) -> Job:
    named = {s.base for s in rng.clean} | {s.base for s in rng.dirty}
    return Job(
        view.directory,
        view.name,
        [(s.base, s.next_offset, s.size, s.largest_ts) for s in view.segments if s.base in named],
        [s.base for s in rng.clean],
        [s.base for s in rng.dirty],
        rng.first_dirty,
        view.log_start,
        view.config,
        dict(view.producer_last_offsets),
        now_ms,
        max_map_entries,
        rate,
        os.getpid(),
        list(view.aborted),
        dict(view.marker_epochs),
    )


def child_init(parent: int) -> None:
    """Runs once in each cleaner process: below the broker in the scheduler's eyes, and gone when the
    broker is. A pool worker would otherwise wait for work forever after a kill -9 of the broker: it
    holds a write end of its own job queue, so it never sees the queue close."""
    try:
        os.nice(10)
    except OSError:
        pass
    # ``parent`` comes from the broker: a child that starts after a kill -9 of the broker has already
    # been adopted by another process, and must see that as well.

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def run(job: Job) -> Result:
    """In the child: map the dirty segments and write every group's ``.cleaned`` segment (durable, with
    indexes). Nothing here touches the log's own files but to read them."""
    infos: list[SegmentInfo] = []
    try:
        for base, nxt, size, ts in job.segments:
            path = job.directory / f"{base:020d}.log"
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                raise CleaningAborted(f"{job.name}: segment {base} is gone") from None
            infos.append(SegmentInfo(None, base, nxt, size, ts, fd, path))
            if os.fstat(fd).st_size < size:
                raise CleaningAborted(f"{job.name}: segment {base} shrank")
        view = LogView(
            job.directory,
            job.name,
            infos,
            job.log_start,
            1 << 62,
            job.config,
            job.producer_last_offsets,
            aborted=job.aborted,
            marker_epochs=job.marker_epochs,
        )
        by_base = {s.base: s for s in infos}
        rng = Cleanable([by_base[b] for b in job.clean], [by_base[b] for b in job.dirty], job.first_dirty)
        cleaner = Cleaner(
            Throttler(job.io_max_bytes_per_second),
            max_map_entries=job.max_map_entries,
            alive=lambda: os.getppid() == job.parent_pid,
        )
        stats = CleanStats()
        offsets, map_end, groups = cleaner.plan(view, rng, stats)
        result = Result(stats)
        written = []
        txns = cleaner.transactions_for(view, groups)
        try:
            for group in groups:
                cleaned = cleaner.write_group(view, group, offsets, map_end, job.now_ms, stats, txns)
                written.append(cleaned)
                cleaned.abandon()  # closed; the broker opens it again to swap it in
                result.groups.append((group[0].base, [s.base for s in group]))
                stats.groups += 1
        except BaseException:
            for c in written:
                discard(c)
            raise
        if txns.revisit:
            stats.due_at(job.now_ms)
        return result
    finally:
        for s in infos:
            os.close(s.fd)
